"""Topic map: 2-D layout + KMeans clusters labelled by TF-IDF terms, computed
at ingest and cached per catalog state."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from rag import topics
from tests.conftest_ui import _hash_vec, synthetic_papers


def _vectors(papers):
    return np.stack([_hash_vec(p.title + " " + p.abstract) for p in papers])


def test_compute_clusters_by_topic_and_labels_them():
    papers = synthetic_papers(60)
    tmap = topics.compute([p.paper_id for p in papers], _vectors(papers),
                          [p.title + ". " + p.abstract for p in papers], key="k", k=6)
    assert len(tmap.points) == 60 and 1 <= len(tmap.clusters) <= 6
    assert all(0 <= p.x <= 1 and 0 <= p.y <= 1 for p in tmap.points)
    assert tmap.method.startswith("t-SNE")
    # Papers of one synthetic topic land in one cluster, and its label names the topic.
    by_topic: dict[str, set[int]] = {}
    for p, pt in zip(papers, tmap.points, strict=True):
        by_topic.setdefault(p.title.split()[0].lower(), set()).add(pt.cluster)
    assert sum(len(c) for c in by_topic.values()) <= 8, by_topic
    labels = " ".join(c.label for c in tmap.clusters)
    assert "diffusion" in labels and "graph" in labels, labels
    assert sum(c.size for c in tmap.clusters) == 60
    # Deterministic: the same input gives the same map.
    again = topics.compute([p.paper_id for p in papers], _vectors(papers),
                           [p.title + ". " + p.abstract for p in papers], key="k", k=6)
    assert [p.to_dict() for p in again.points] == [p.to_dict() for p in tmap.points]


def test_no_cluster_holds_more_than_the_cap():
    """Issue 29: one catch-all cluster held 32 of the bundled 57 papers. A
    lopsided corpus (70% on one broad topic with sub-topics, all sharing one
    direction as MiniLM abstracts do) still gets no cluster over ``MAX_SHARE``."""
    rng = np.random.default_rng(1)
    dim, n = 48, 60
    common = rng.normal(size=dim) * 4.0
    topics_ = rng.normal(size=(6, dim))
    which = np.array([i % 3 if i < 42 else 3 + i % 3 for i in range(n)])  # 42 on sub-topics 0-2
    broad = rng.normal(size=dim) * 2.0
    vecs = common + np.where((which < 3)[:, None], broad, 0) + topics_[which] * 0.8 \
        + rng.normal(size=(n, dim)) * 0.3
    assign = topics.cluster(vecs / np.linalg.norm(vecs, axis=1, keepdims=True), 2)
    sizes = np.bincount(assign)
    assert sizes.sum() == n and sizes.max() <= topics.MAX_SHARE * n, sizes
    assert len(sizes) > 2  # the oversized cluster was split
    tmap = topics.compute([f"p{i}" for i in range(n)], vecs, [f"paper {i}" for i in range(n)])
    assert max(c.size for c in tmap.clusters) <= topics.MAX_SHARE * n
    assert sum(c.size for c in tmap.clusters) == n
    assert tmap.method.endswith(f"KMeans({len(tmap.clusters)})")


def test_bundled_corpus_clusters_are_balanced(fake_engine):
    tmap = fake_engine().topic_map()
    sizes = sorted((c.size for c in tmap.clusters), reverse=True)
    assert sum(sizes) == 57 and sizes[0] <= topics.MAX_SHARE * 57, sizes


def test_tiny_and_empty_corpora():
    assert topics.compute([], np.zeros((0, 8)), []).points == []
    papers = synthetic_papers(2)
    tmap = topics.compute([p.paper_id for p in papers], _vectors(papers),
                          [p.abstract for p in papers])
    assert len(tmap.points) == 2 and len(tmap.clusters) == 1
    assert topics.n_clusters_for(57) == 5 and topics.n_clusters_for(3300) == 16


def test_ingest_computes_and_caches_the_map(fake_engine, tmp_path):
    eng = fake_engine()
    cache = eng.settings.storage.data_dir / topics.CACHE_NAME
    assert cache.is_file(), "ingest computes the topic map"
    first = eng.topic_map()
    assert len(first.points) == 57 and first.seconds > 0
    stamp = cache.stat().st_mtime_ns
    assert eng.topic_map().key == first.key and cache.stat().st_mtime_ns == stamp  # cached
    # A changed catalog invalidates it: the map is recomputed, never stale.
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "x.jsonl").write_text(json.dumps({
        "id": "extra-1", "title": "An extra paper",
        "abstract": "We propose a graph transformer for molecules and report strong results "
                    "on three molecular property benchmarks."}) + "\n", encoding="utf-8")
    eng.ingest([*eng.settings.corpus.corpus_paths, extra], progress=False)
    second = eng.topic_map()
    assert second.key != first.key and len(second.points) == 58
    assert json.loads(cache.read_text())["key"] == second.key


def test_layout_settings_reach_tsne_and_key_the_cache(fake_engine, monkeypatch):
    from sklearn import manifold

    seen: list[dict] = []
    real = manifold.TSNE

    def recording(**kw):
        seen.append(kw)
        return real(**kw)

    monkeypatch.setattr(manifold, "TSNE", recording)
    eng = fake_engine()
    default = eng.topic_map()
    assert seen == [] or (seen[-1]["max_iter"], seen[-1]["angle"]) == (400, 0.8)
    other = fake_engine(topic_map_iterations=300, topic_map_angle=0.6).topic_map()
    assert (seen[-1]["max_iter"], seen[-1]["angle"]) == (300, 0.6)
    assert other.key != default.key  # other settings: the cached map is not reused
    assert len(other.points) == len(default.points) == 57


def test_corrupt_cache_is_recomputed(fake_engine):
    eng = fake_engine()
    cache = eng.settings.storage.data_dir / topics.CACHE_NAME
    cache.write_text("{not json", encoding="utf-8")
    assert len(eng.topic_map().points) == 57


@pytest.mark.slow
def test_topic_map_at_3300_papers(tmp_path, capsys):
    """A synthetic 3,300-paper corpus ingested by the real Engine (hashed
    embeddings keep the ingest quick): the map covers every paper and its
    computation time is reported."""
    from rag.config import Settings
    from rag.engine import Engine
    from tests.conftest import FakeEmbedding

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    papers = synthetic_papers(3300)
    with (corpus / "syn.jsonl").open("w", encoding="utf-8") as f:
        for p in papers:
            f.write(json.dumps({"id": p.paper_id, "title": p.title, "abstract": p.abstract,
                                "authors": p.authors, "venue": p.venue, "year": p.year}) + "\n")
    s = Settings(_env_file=None, data_dir=tmp_path / "idx", corpus_paths=[corpus],
                 dedup_threshold=1.01)
    eng = Engine(s, embed_model=FakeEmbedding())
    t0 = time.perf_counter()
    eng.ingest(progress=False)
    ingest_s = time.perf_counter() - t0
    tmap = eng.topic_map()
    assert len(tmap.points) >= 3000 and len(tmap.clusters) == 16
    with capsys.disabled():
        print(f"\n3,300 papers: ingest {ingest_s:.1f}s, topic map {tmap.method} "
              f"{tmap.seconds:.1f}s")
    t0 = time.perf_counter()
    assert eng.topic_map().key == tmap.key
    assert time.perf_counter() - t0 < 2.0  # the cached map loads quickly
