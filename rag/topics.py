"""Topic map: a 2-D map of the corpus, with clusters labelled by top terms.

Built from the paper embeddings the index already holds (one normalised
centroid vector per paper): scikit-learn t-SNE places the papers in 2-D
(PCA for tiny corpora), KMeans on the full vectors, centred (the corpus mean
removed) and normalised again, groups them by cosine, and TF-IDF over each
cluster's titles and abstracts names it. Without the centring, the direction
all MiniLM abstracts share dominated: on the bundled 57 papers one catch-all
cluster held 32 of them, the diffusion papers included; centred, the sizes are
17/13/12/9/6 and every diffusion paper is in the "diffusion" cluster. A
cluster still holding more than ``MAX_SHARE`` of the papers is split in two. The map is computed once
at ingest and cached in the data dir as JSON, keyed by the catalog state
(paper ids + content hashes + embedding model), so an unchanged corpus never
recomputes it and a changed one never shows a stale map.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

CACHE_NAME = "topic_map.json"
FORMAT = 3  # bump when the algorithm changes: old caches are recomputed
# t-SNE defaults (settings.corpus.topic_map_iterations / topic_map_angle). On the
# 3,278-paper bench corpus (1 thread), scikit-learn's own 1,000 iterations at angle
# 0.5 took 14.7-16.1 s with trustworthiness 0.926 / 0.885 / 0.820 (5 / 10 / 30
# neighbours, cosine); 400 at 0.8 take 3.9-4.2 s with 0.925 / 0.888 / 0.826, the
# KMeans clusters no less together on the map (10-NN agreement 0.503 vs 0.492).
# 250 of the iterations are the early exaggeration scikit-learn always runs.
TSNE_ITERATIONS = 400
TSNE_ANGLE = 0.8
MAX_SHARE = 0.4  # a cluster holding more of the papers than this is split
MAX_CLUSTERS = 16


@dataclass
class TopicCluster:
    cluster: int
    label: str  # top terms, e.g. "diffusion · sampling · score"
    terms: list[str]
    size: int
    x: float  # label position (cluster centre on the map), in [0, 1]
    y: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TopicPoint:
    paper_id: str
    x: float  # in [0, 1]
    y: float
    cluster: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TopicMap:
    key: str  # catalog state the map was computed from
    method: str  # e.g. "t-SNE + KMeans(8)"
    points: list[TopicPoint] = field(default_factory=list)
    clusters: list[TopicCluster] = field(default_factory=list)
    seconds: float = 0.0  # time the computation took (not the cache load)

    def paper_ids(self, cluster: int) -> list[str]:
        return [p.paper_id for p in self.points if p.cluster == cluster]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "key": self.key,
            "method": self.method,
            "seconds": self.seconds,
            "clusters": [c.to_dict() for c in self.clusters],
            "points": [p.to_dict() for p in self.points],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TopicMap:
        return cls(
            key=d["key"],
            method=d.get("method", ""),
            seconds=float(d.get("seconds", 0.0)),
            clusters=[TopicCluster(**c) for c in d.get("clusters", [])],
            points=[TopicPoint(**p) for p in d.get("points", [])],
        )


def catalog_key(hashes: dict[str, str], model_name: str, params: str = "") -> str:
    """Identity of a catalog state: paper ids, content hashes, embedding model
    (and ``params``, the layout's settings)."""
    h = hashlib.sha256(f"{FORMAT}|{model_name}|{params}".encode())
    for pid in sorted(hashes):
        h.update(f"\n{pid}\t{hashes[pid]}".encode())
    return h.hexdigest()[:24]


def n_clusters_for(n: int) -> int:
    """About sqrt(n)/1.5 clusters: 5 for 57 papers, 16 (the cap) for 3,300."""
    if n < 4:
        return 1
    return int(min(MAX_CLUSTERS, max(2, round(math.sqrt(n) / 1.5))))


def _centred(vectors: np.ndarray) -> np.ndarray:
    """Unit vectors less their mean, normalised again: cosine KMeans on these
    separates topics instead of the one direction every abstract shares."""
    c = vectors - vectors.mean(axis=0, keepdims=True)
    norms = np.linalg.norm(c, axis=1, keepdims=True)
    return c / np.where(norms > 1e-12, norms, 1.0)


def cluster(vectors: np.ndarray, k: int, *, seed: int = 0,
            max_share: float = MAX_SHARE, max_k: int = MAX_CLUSTERS) -> np.ndarray:
    """Cluster ids (0..k'-1) for normalised ``vectors``: KMeans(``k``) on the
    centred vectors, then while one cluster holds more than ``max_share`` of
    them (and fewer than ``max_k`` clusters exist), that one is split in two."""
    n = len(vectors)
    if k <= 1 or n < 2:
        return np.zeros(n, dtype=int)
    from sklearn.cluster import KMeans

    x = _centred(vectors)
    assign = KMeans(n_clusters=k, n_init=4, random_state=seed).fit_predict(x).astype(int)
    cap = max(2, math.floor(max_share * n))
    while assign.max() + 1 < max_k:
        sizes = np.bincount(assign)
        big = int(np.argmax(sizes))
        if sizes[big] <= cap:
            break
        rows = np.where(assign == big)[0]
        sub = KMeans(n_clusters=2, n_init=4, random_state=seed).fit_predict(x[rows])
        if sub.min() == sub.max():  # identical vectors: nothing to split
            break
        assign[rows[sub == 1]] = assign.max() + 1
    return assign


def _layout(vectors: np.ndarray, seed: int, iterations: int = TSNE_ITERATIONS,
            angle: float = TSNE_ANGLE) -> tuple[np.ndarray, str]:
    n = len(vectors)
    if n < 3:
        return np.column_stack([np.arange(n, dtype=float), np.zeros(n)]), "line"
    from sklearn.decomposition import PCA

    dims = min(50, n - 1, vectors.shape[1])
    reduced = PCA(n_components=dims, random_state=seed).fit_transform(vectors)
    if n < 12:
        return reduced[:, :2] if dims >= 2 else np.column_stack([reduced[:, 0], np.zeros(n)]), "PCA"
    from sklearn.manifold import TSNE

    perplexity = float(min(30.0, max(2.0, (n - 1) / 4)))
    xy = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed,
              metric="cosine", learning_rate="auto", max_iter=max(250, iterations),
              angle=angle).fit_transform(reduced)
    return xy, "t-SNE"


def _normalise(xy: np.ndarray) -> np.ndarray:
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    span = np.where(hi - lo > 1e-12, hi - lo, 1.0)
    return (xy - lo) / span


def _labels(texts: list[str], assign: np.ndarray, k: int, n_terms: int = 3) -> list[list[str]]:
    """Top TF-IDF terms of each cluster, relative to the whole corpus."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    n = len(texts)
    vec = TfidfVectorizer(stop_words="english", ngram_range=(1, 2), sublinear_tf=True,
                          min_df=2 if n >= 20 else 1, max_df=0.5 if n >= 20 else 1.0,
                          token_pattern=r"(?u)\b[A-Za-z][A-Za-z\-]{2,}\b")
    try:
        m = vec.fit_transform(texts)
    except ValueError:  # empty vocabulary
        return [[] for _ in range(k)]
    vocab = np.array(vec.get_feature_names_out())
    overall = np.asarray(m.mean(axis=0)).ravel()
    out: list[list[str]] = []
    for c in range(k):
        rows = np.where(assign == c)[0]
        if len(rows) == 0:
            out.append([])
            continue
        mean = np.asarray(m[rows].mean(axis=0)).ravel()
        score = mean - 0.5 * overall  # distinctive, not just frequent everywhere
        terms: list[str] = []
        for i in np.argsort(-score):
            t = str(vocab[i])
            if score[i] <= 0 or len(terms) >= n_terms:
                break
            # Skip a word already inside a chosen phrase (and vice versa).
            if any(t in s.split() or s in t.split() for s in terms):
                continue
            terms.append(t)
        out.append(terms)
    return out


def _one_thread(fn, *args):
    """``fn(*args)`` with this thread's OpenMP pool at one thread (OpenMP
    limits are per thread; the caller's ``threadpool_limits`` covers BLAS)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="openmp"):
        return fn(*args)


def compute(paper_ids: list[str], vectors: np.ndarray, texts: list[str], *,
            key: str = "", seed: int = 0, k: int | None = None,
            iterations: int = TSNE_ITERATIONS, angle: float = TSNE_ANGLE) -> TopicMap:
    """The map for these papers (``vectors`` row i belongs to ``paper_ids[i]``;
    ``texts`` are their titles + abstracts, for the cluster labels); ``iterations``
    and ``angle``: the t-SNE's (Barnes-Hut) settings."""
    t0 = time.perf_counter()
    n = len(paper_ids)
    if n == 0:
        return TopicMap(key=key, method="empty")
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms > 0, norms, 1.0)
    k = k or n_clusters_for(n)
    k = max(1, min(k, n))
    from threadpoolctl import threadpool_limits

    # One thread each, the layout beside the clustering: OpenMP/OpenBLAS
    # threads spin while they wait, and under CPU contention (an LLM running,
    # the other core busy) two-thread t-SNE ran 5x slower than one thread
    # (12 s against 2.4 s for 800 papers). On the 2-core machine otherwise
    # idle, two threads did not help either (3,300 papers: 36.7 s against
    # 17.1 s). Same results: the seeds fix them.
    with threadpool_limits(limits=1), ThreadPoolExecutor(1, "topic-layout") as pool:
        fut = pool.submit(_one_thread, _layout, vectors, seed, iterations, angle)
        assign = cluster(vectors, k, seed=seed)
        k = int(assign.max()) + 1
        terms = _labels(texts, assign, k)
        xy, layout = fut.result()
    xy = _normalise(xy)
    clusters = []
    for c in range(k):
        rows = np.where(assign == c)[0]
        if len(rows) == 0:
            continue
        # Label at the member nearest the cluster's median, so it sits on its points.
        med = np.median(xy[rows], axis=0)
        anchor = rows[np.argmin(((xy[rows] - med) ** 2).sum(axis=1))]
        label = " · ".join(terms[c]) or f"cluster {c + 1}"
        clusters.append(TopicCluster(cluster=c, label=label, terms=terms[c], size=len(rows),
                                     x=round(float(xy[anchor, 0]), 4),
                                     y=round(float(xy[anchor, 1]), 4)))
    clusters.sort(key=lambda c: -c.size)
    points = [TopicPoint(paper_id=pid, x=round(float(xy[i, 0]), 4), y=round(float(xy[i, 1]), 4),
                         cluster=int(assign[i])) for i, pid in enumerate(paper_ids)]
    return TopicMap(key=key, method=f"{layout} + KMeans({k})", points=points,
                    clusters=clusters, seconds=round(time.perf_counter() - t0, 3))


# ------------------------------------------------------------------ cache


def load_cached(data_dir: Path, key: str) -> TopicMap | None:
    path = Path(data_dir) / CACHE_NAME
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if d.get("format") != FORMAT or d.get("key") != key:
        return None
    try:
        return TopicMap.from_dict(d)
    except (KeyError, TypeError):
        return None


def save(data_dir: Path, tmap: TopicMap) -> None:
    path = Path(data_dir) / CACHE_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(tmap.to_dict()), encoding="utf-8")
    tmp.replace(path)  # atomic: readers never see half a file


def paper_vectors(index: Any) -> tuple[list[str], np.ndarray]:
    """Every paper's centroid vector from the index's paper collection."""
    coll = index.paper_collection
    ids: list[str] = []
    vecs: list[Any] = []
    for off in range(0, coll.count(), 5000):
        got = coll.get(include=["embeddings"], limit=5000, offset=off)
        ids += list(got["ids"])
        vecs += list(got["embeddings"])
    if not ids:  # an empty index: no papers, no vectors
        return ids, np.zeros((0, 0), dtype=np.float32)
    return ids, np.asarray(vecs, dtype=np.float32).reshape(len(ids), -1)


def ensure(index: Any, model_name: str, *, force: bool = False) -> TopicMap:
    """The cached map for the index's current catalog, computed if missing."""
    data_dir = Path(index.settings.storage.data_dir)
    cs = index.settings.corpus
    hashes = index.catalog.hashes()
    key = catalog_key(hashes, model_name, f"{cs.topic_map_iterations}|{cs.topic_map_angle}")
    if not force and (cached := load_cached(data_dir, key)) is not None:
        return cached
    papers = {p.paper_id: p for p in index.catalog.papers()}
    ids, vecs = paper_vectors(index)
    keep = [i for i, pid in enumerate(ids) if pid in papers]
    ids = [ids[i] for i in keep]
    vecs = vecs[keep] if len(keep) else vecs[:0]
    order = np.argsort(ids, kind="stable")  # deterministic, whatever order Chroma returns
    ids = [ids[i] for i in order]
    vecs = vecs[order] if len(ids) else vecs
    texts = [f"{papers[pid].title if not papers[pid].title_derived else ''}. "
             f"{papers[pid].abstract}" for pid in ids]
    tmap = compute(ids, vecs, texts, key=key, iterations=cs.topic_map_iterations,
                   angle=cs.topic_map_angle)
    if ids:
        try:
            save(data_dir, tmap)
        except OSError:
            log.warning("could not cache the topic map in %s", data_dir, exc_info=True)
    log.info("topic map of %d papers: %s in %.2f s", len(ids), tmap.method, tmap.seconds)
    return tmap


def at_ingest(index: Any, model_name: str) -> TopicMap | None:
    """Ingest hook: compute (or reuse) the map; a failure here never fails
    the ingest, the app computes it again on first use."""
    try:
        return ensure(index, model_name)
    except Exception:  # noqa: BLE001 - the map is an extra, the index is what matters
        log.warning("topic map not computed at ingest", exc_info=True)
        return None
