"""The model's evidence choice with the papers listed in retrieval order or
best paper last (setting ``evidence_best_last``), on the same candidates.

Each tune question that neither pins nor names a paper is retrieved once; its
candidate sentences are built twice (the two orders) and the model chooses in
each, as ``Answerer._choose`` would, stopping there (~14 s a choice on 2
cores). A row records which retrieved papers (0 = top-ranked) each choice
quotes and where the gold papers are, so that the choice can be scored
without the rest of the answer. Resumable: rows already in ``--out`` are kept.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python -m eval.choice_order \\
        --ids IDS.txt --out rows.jsonl          # or --sample (the seed-0 sample)
    .venv/bin/python -m eval.choice_order --out rows.jsonl --report
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

QUESTIONS = Path(__file__).resolve().parent / "questions.jsonl"
DISTRACTORS = Path(__file__).resolve().parent / "distractors" / "v267"
SAMPLE = {"which": 30, "paraphrase": 25, "fact": 10, "topic": 5, "unanswerable": 20}
ORDERS = ("rank", "last")


def sample(questions: list[dict[str, Any]], per_type: dict[str, int], seed: int = 0) -> list[dict[str, Any]]:
    """A seeded sample of single-turn, unpinned tune questions, types interleaved."""
    rng = random.Random(seed)
    picked: list[tuple[float, dict[str, Any]]] = []
    for t, n in per_type.items():
        pool = [q for q in questions if q["type"] == t]
        rng.shuffle(pool)
        picked += [(i / n, q) for i, q in enumerate(pool[:n])]
    return [q for _, q in sorted(picked, key=lambda x: x[0])]


def choose_both(engine: Any, q: dict[str, Any]) -> dict[str, Any]:
    """One row: the papers each order's choice quotes, and the gold papers'
    places among the retrieved ones."""
    from rag.answer.decision import Signals
    from rag.answer.declines import Declined
    from rag.answer.evidence import choice_schema, excerpts, parse_choice
    from rag.prompts import render

    a, s, text = engine.answerer, engine.settings, q["question"]
    hits = a._hits(text, pinned=[], include=[], k=s.retrieval.top_k, filters=None)
    trace: list = []
    try:
        cands, hits = a._gate_and_candidates(text, hits, [], trace, Signals())
    except Declined:  # nothing retrieved: no choice to make
        return {"id": q["id"], "skip": "nothing retrieved"}
    if any(r.name == "named_papers_only" for r in trace):
        return {"id": q["id"], "skip": "names a paper"}
    gold = {(g["path"], g["ordinal"]) for g in q.get("gold") or []}
    row: dict[str, Any] = {"id": q["id"], "type": q["type"], "answerable": bool(gold),
                           "gold_idx": [i for i, h in enumerate(hits)
                                        if any((p.path, p.ordinal) in gold for p in h.paper.provenance)]}
    kinds = {c.hit for c in cands}
    for order in ORDERS:
        cs = a.top_candidates(text, hits, best_last=order == "last")
        assert {c.hit for c in cs} == kinds
        msgs = [{"role": "system", "content": render("evidence_system")},
                {"role": "user", "content": render("evidence_user", excerpts=excerpts(cs, hits), question=text)}]
        ids = parse_choice(a.steps.choose(msgs, choice_schema(len(cs), s.evidence.evidence_max_chosen)),
                           len(cs)) or []
        row[order] = {"papers": sorted({cs[i - 1].hit for i in ids}), "n": len(ids),
                      "offered": len(kinds)}
    return row


def report(rows: list[dict[str, Any]]) -> str:
    """Per order: of the questions whose gold paper was offered, how many
    choices quote it, quote only gold papers; and the flips between orders."""
    rows = [r for r in rows if "rank" in r]
    offered = [r for r in rows if r["gold_idx"]]
    out = [f"{len(rows)} questions chosen in both orders; gold paper offered in {len(offered)}"]
    for o in ORDERS:
        c: Counter[str] = Counter()
        for r in offered:
            p, g = set(r[o]["papers"]), set(r["gold_idx"])
            c["gold"] += bool(p & g)
            c["only gold"] += bool(p) and p <= g
            c["papers"] += len(p)
        out.append(f"{o}: quotes a gold paper {c['gold']}, only gold papers {c['only gold']}, "
                   f"papers quoted {c['papers']}")
    fixed = [r["id"] for r in offered if not set(r["rank"]["papers"]) & set(r["gold_idx"])
             and set(r["last"]["papers"]) & set(r["gold_idx"])]
    broken = [r["id"] for r in offered if set(r["rank"]["papers"]) & set(r["gold_idx"])
              and not set(r["last"]["papers"]) & set(r["gold_idx"])]
    out.append(f"best last: fixed {len(fixed)} {' '.join(fixed)}; broken {len(broken)} {' '.join(broken)}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m eval.choice_order", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="rows JSONL (appended; resumable)")
    ap.add_argument("--ids", help="file of tune question ids (whitespace-separated)")
    ap.add_argument("--sample", action="store_true", help="the seed-0 sample of SAMPLE per type")
    ap.add_argument("--report", action="store_true", help="only print the report of --out")
    args = ap.parse_args(argv)
    out = Path(args.out)
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    if not args.report:
        from eval.runner import build_engine, eval_data_dir, prepare_corpus
        from rag.config import BUNDLED_CORPUS, Settings
        from rag.embed import embed_model_name

        qs = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
        tune = [q for q in qs if q.get("split") == "tune" and not q.get("history") and not q.get("pinned")]
        if args.ids:
            want = set(Path(args.ids).read_text().split())
            todo = [q for q in tune if q["id"] in want]
        elif args.sample:
            todo = sample(tune, SAMPLE)
        else:
            ap.error("give --ids, --sample or --report")
        settings = Settings()
        corpus = [BUNDLED_CORPUS, DISTRACTORS]
        engine = build_engine({"data_dir": eval_data_dir(settings.storage.data_dir, corpus,
                                                         embed_model_name(settings))})
        prepare_corpus(engine, corpus)
        done = {r["id"] for r in rows}
        with out.open("a", encoding="utf-8") as f:
            for q in todo:
                if q["id"] in done:
                    continue
                row = choose_both(engine, q)
                rows.append(row)
                f.write(json.dumps(row) + "\n")
                f.flush()
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(report(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
