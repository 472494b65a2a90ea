"""Collecting decision signals and fitting the decision (``aqa eval signals``,
``aqa eval fit-decision``).

``collect`` runs each question through the real engine up to its decision
(retrieval, the model's evidence choice, the check) and stops before the
synthesis: ~8-10 s a question with the local model. Each row holds the
question's label (answerable or not, as the index makes it) and its
``rag.answer.decision.Signals``. ``fit_rows`` fits ``rag.answer.decision.fit`` on tune rows
only, and reports the out-of-fold ROC AUC and the risk-coverage curve from
which the operating point (settings ``answer.decision_answer_at``) is chosen.
``rescore_rows`` re-asks only the check, in another wording, on what a row's
check read (``aqa eval rescore-check``): ~4 s a row instead of ~10-20 s.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from eval.runner import as_indexed, conversation_of

# The operating point the fit suggests: the highest decline rate on
# unanswerable questions among cut-offs that wrongly decline at most this share.
MAX_WRONG_DECLINES = 0.05
# Cross-validation repeats (shuffles) whose out-of-fold P are averaged for the
# curve: with ~100 unanswerable rows one shuffle moved the suggested cut-off
# between 0.625 and 0.725.
CV_REPEATS = 5


def signals_of(engine: Any, q: Any) -> dict[str, Any]:
    """One question's decision signals (the stream is left at its decision)."""
    q = as_indexed(engine, q)
    history, filters = conversation_of(engine, q)
    answer = None
    for ev in engine.ask_stream(q.question, history=history, filters=filters):
        if ev.answer is not None:
            answer = ev.answer
            if answer.decision is not None or ev.kind == "answer":
                break
    d = (answer.decision if answer else None) or {}
    check = next((r.data for r in (answer.rules if answer else []) if r.name == "evidence_check"), {})
    return {"id": q.id, "type": q.type, "split": getattr(q, "split", "tune"),
            "answerable": bool(q.answerable), "outcome": d.get("outcome"),
            "p_answer": d.get("p_answer"), "signals": d.get("signals"),
            # The check's view (question as interpreted, chosen sentences): a
            # variant of the check can be scored on these rows alone.
            "checked": {k: check[k] for k in ("question", "quotes") if k in check} or None}


def collect(engine: Any, questions: Sequence[Any], out: Path, *, progress: bool = True
            ) -> list[dict[str, Any]]:
    """Rows for ``questions``, appended to ``out`` as each finishes; questions
    already in ``out`` are kept and skipped (an interrupted collection resumes)."""
    done = {r["id"]: r for r in read_rows([out])} if out.exists() else {}
    rows = [done[q.id] for q in questions if q.id in done]
    todo = [q for q in questions if q.id not in done]
    t0 = time.perf_counter()
    with out.open("a", encoding="utf-8") as f:
        for i, q in enumerate(todo, 1):
            row = signals_of(engine, q)
            rows.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
            if progress:
                eta = (time.perf_counter() - t0) / i * (len(todo) - i)
                print(f"[{i}/{len(todo)}] {q.id} {row['outcome']} p={row['p_answer']} "
                      f"(eta {eta / 60:.0f} min)", file=sys.stderr, flush=True)
    return rows


def rescore_rows(model: Any, rows: Sequence[dict[str, Any]], prompt: str, out: Path, *,
                 progress: bool = True) -> tuple[list[dict[str, Any]], int]:
    """``rows`` with the check asked again in the wording ``prompts/{prompt}_*``
    on the quotes each row's check read (its ``checked``), the check's signals
    replaced; appended to ``out`` as each finishes, rows already there kept
    (an interrupted rescoring resumes). The row's ``outcome`` and ``p_answer``
    (the old decision's) are dropped. Returns the rows and how many were
    skipped for lack of ``checked`` (collect those again with ``signals``)."""
    from rag.answer.decision import Signals
    from rag.answer.steps import check_messages, graded_no

    done = {r["id"]: r for r in read_rows([out])} if out.exists() else {}
    viewed = [r for r in rows if r.get("checked")]
    kept = [done[r["id"]] for r in viewed if r["id"] in done]
    todo = [r for r in viewed if r["id"] not in done]
    t0 = time.perf_counter()
    with out.open("a", encoding="utf-8") as f:
        for i, r in enumerate(todo, 1):
            c = r["checked"]
            p_no = graded_no(model, check_messages(c["question"], c["quotes"], prompt))
            sig = Signals(**(r["signals"] or {}))
            if p_no is not None:
                sig.set_check(p_no)
            row = {k: v for k, v in r.items() if k not in ("outcome", "p_answer")}
            row.update(signals=sig.to_dict(), rescored={"prompt": prompt, "p_no": p_no})
            kept.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
            if progress:
                eta = (time.perf_counter() - t0) / i * (len(todo) - i)
                print(f"[{i}/{len(todo)}] {r['id']} P(no) {p_no} (eta {eta / 60:.0f} min)",
                      file=sys.stderr, flush=True)
    return kept, len(rows) - len(viewed)


def read_rows(paths: Iterable[Path]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for p in paths:
        for line in Path(p).read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                rows[r["id"]] = r
    return list(rows.values())


def stratum_weights(rows: list[dict[str, Any]], questions: Sequence[Any]) -> list[float]:
    """Each row's weight when the rows are a sample of ``questions``' tune
    split: the tune questions of its stratum (type, answerable as the set says)
    over the rows of that stratum. All 1 when every tune question has a row."""
    from collections import Counter

    key = {q.id: (q.type, bool(q.answerable)) for q in questions
           if getattr(q, "split", "tune") == "tune"}
    pop = Counter(key.values())
    have = Counter(key.get(r["id"]) for r in rows)
    return [pop[key[r["id"]]] / have[key[r["id"]]] if r["id"] in key else 1.0 for r in rows]


def fit_rows(rows: list[dict[str, Any]], *, seed: int = 0, signed: bool = True,
             drop: Sequence[str] = (), questions: Sequence[Any] | None = None) -> dict[str, Any]:
    """The fitted decision (JSON data) with its out-of-fold AUC, curve and
    suggested operating point; heldout rows are refused. ``signed``: hold each
    signal to its direction (``rag.answer.decision.SIGNS``); ``drop``: signals
    left out of the fit (their coefficient is 0); ``questions``: the question
    set the rows were sampled from (rows are weighted by ``stratum_weights``)."""
    from rag.answer.decision import SIGNS, Signals, auc, curve, fit
    from rag.errors import AqaError

    if any(r.get("split") == "heldout" for r in rows):
        raise AqaError("signal rows include heldout questions: fit on tune only")
    rows = [r for r in rows if r.get("signals")]
    if len({r["answerable"] for r in rows}) < 2:
        raise AqaError("need both answerable and unanswerable questions to fit the decision")
    labels = [int(r["answerable"]) for r in rows]
    names = [n for n in Signals.names() if n not in set(drop)]
    weights = stratum_weights(rows, questions) if questions else None
    fits = [fit([r["signals"] for r in rows], labels, seed=seed + k, names=names,
                signs=SIGNS if signed else None, weights=weights) for k in range(CV_REPEATS)]
    data = fits[0][0]  # the model: fit on all rows, its strength chosen with the first shuffle
    oof = [sum(ps) / len(ps) for ps in zip(*(f[1] for f in fits), strict=True)]
    pts = curve(oof, labels, weights=weights)
    ok = [c for c in pts if 1 - c["answered_answerable"] <= MAX_WRONG_DECLINES]
    best = max(ok, key=lambda c: (c["declined_unanswerable"], c["cutoff"])) if ok else pts[0]
    data.update(oof_auc=round(auc(oof, labels), 4), curve=pts, suggested_answer_at=best["cutoff"],
                cv_repeats=CV_REPEATS,
                fit_on=sorted(r["id"] for r in rows),
                weighted=bool(weights and any(w != 1.0 for w in weights)))
    return data


def curve_table(data: dict[str, Any]) -> str:
    lines = ["| cut-off | answered (answerable) | declined (unanswerable) | precision |",
             "|---|---|---|---|"]
    for c in data["curve"][::2]:
        lines.append(f"| {c['cutoff']:.3f} | {c['answered_answerable']:.3f} | "
                     f"{c['declined_unanswerable']:.3f} | {c['precision']:.3f} |")
    return "\n".join(lines)
