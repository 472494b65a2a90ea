"""Re-score the evidence check on a finished run's evidence (``aqa eval replay``).

The check (rule ``evidence_not_answering``) is the main lever on declines, and
check wordings are best compared on the same evidence. A full eval spends most
of its ~30 s a question reading the evidence prompt and writing the
synthesis. This tool replays each question's recorded evidence choice (the ids
in its ``no_evidence`` trace) through the real engine and its rules, stops
before the synthesis, and asks the check in each given wording: ~8 s a
question with the local model. It prints each wording's ROC AUC as a detector
of unanswerable questions. Use it on tune runs only.

The replayed candidates are the engine's own, so the replay is exact only
while retrieval and the candidate rules are unchanged since the run. The
``p_engine`` column is the engine's own check; compare it with ``p_recorded``,
the run's figure, to see whether the replay still matches.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

CHOSE = re.compile(r"model chose \[([\d,\s]*)\]")
P_NOT = re.compile(r"P\(not answered\) ([\d.]+)")


class NotReplayed(Exception):
    """The engine asked the model for something a replay does not hold."""


def read_results(run_dir: Path | str) -> list[dict[str, Any]]:
    """The records of a run folder's results.jsonl (a run cut short has no summary yet)."""
    text = (Path(run_dir) / "results.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def recorded(results: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per question id: the evidence ids the model chose in the run (``ids``)
    and the run's check probability (``p``, None when the check did not run).
    Questions declined before the model chose are left out."""
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        rules = (r.get("answer") or {}).get("rules") or []
        ids = p = None
        for x in rules:
            data = x.get("data") or {}
            if x["name"] == "no_evidence" and "ids" in data:
                ids = list(data["ids"])
            elif x["name"] == "no_evidence" and (m := CHOSE.search(x["detail"])):
                ids = [int(i) for i in re.findall(r"\d+", m.group(1))]  # runs before the data field
            elif x["name"] == "evidence_check" and "p_no" in data:
                p = data["p_no"]
            elif x["name"] == "evidence_not_answering" and (m := P_NOT.search(x["detail"])):
                p = float(m.group(1))
        if ids is not None:
            out[r["id"]] = {"ids": ids, "p": p}
    return out


def replay(engine: Any, questions: Sequence[Any], choices: dict[str, dict[str, Any]] | None,
           variants: dict[str, tuple[str, str]], *, progress: bool = False) -> list[dict[str, Any]]:
    """One row per question with a recorded choice: whether the engine still
    answers or declines before the synthesis, its own check (``p_engine``), the
    run's (``p_recorded``) and each variant's P(no) on the same evidence.
    With ``choices`` None the model chooses the evidence live (no run needed;
    ~10 s a question) and every question gets a row; ``ids`` records its choice.
    A variant is a (system, user) prompt pair; the user prompt has the
    ``{quotes}`` and ``{question}`` fields of ``prompts/check_user.txt``."""
    from eval.runner import as_indexed, conversation_of
    from rag.answer.evidence import parse_choice
    from rag.answer.steps import VERDICT_PREFIX, Steps

    ans = engine.answerer
    live = choices is None
    if live:
        choices = {q.id: {"ids": None, "p": None} for q in questions}
    own = ans.steps
    graded = getattr(ans.llm, "option_probabilities", None)
    state: dict[str, Any] = {"ids": None}
    seen: dict[str, float | None] = {}

    def choose(messages: list[dict], schema: dict) -> str:
        """The recorded choice, or (live) the model's, kept in ``ids``."""
        if live:
            raw = own.choose(messages, schema)
            state["ids"] = parse_choice(raw, len(schema["properties"]["ids"]["items"]["enum"]))
            return raw
        if state["ids"] is None:
            raise NotReplayed("a replay holds only the evidence choice")
        return json.dumps({"ids": state["ids"]})

    def verdict(q: str, quotes: str) -> float | None:
        """The engine's check, and each variant's on the same quotes."""
        for name, (system, user) in variants.items():
            msgs = [{"role": "system", "content": system},
                    {"role": "user", "content": user.format(quotes=quotes, question=q)}]
            probs = graded(msgs, VERDICT_PREFIX, ("yes", "no")) if graded else None
            seen[name] = None if probs is None else probs["no"]
        seen["p_engine"] = p = own.verdict(q, quotes)
        return p

    def write(messages: list[dict], max_tokens: int, temperature: float) -> Iterator[str]:
        raise NotReplayed("a replay stops before the synthesis")

    # The engine's own path with these steps (the per-paper check is the engine's).
    ans.steps = Steps(choose=choose, verdict=verdict, check=own.check, write=write)
    rows = []
    for q in questions:
        if q.id not in choices:
            continue
        seen.clear()
        q = as_indexed(engine, q)
        state["ids"] = choices[q.id]["ids"]
        history, filters = conversation_of(engine, q)
        outcome = "answered"
        for ev in engine.ask_stream(q.question, history=history, filters=filters):
            if ev.kind == "evidence":
                break  # the synthesis would come next
            if ev.kind == "answer" and ev.answer.declined:
                # The decisive rule is the last that fired (earlier ones only inform).
                outcome = "declined: " + next((r.name for r in reversed(ev.answer.rules)
                                               if r.fired), "?")
        rows.append({"id": q.id, "type": q.type, "answerable": q.answerable, "outcome": outcome,
                     "p_recorded": choices[q.id]["p"], "ids": state["ids"], **seen})
        if progress:
            print(f"{len(rows)}/{len(questions)} {q.id} {outcome}", file=sys.stderr, flush=True)
    return rows


def auc(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    """ROC AUC of ``key`` (a P(no)) as a detector of unanswerable questions,
    over the rows where it was measured; None without both kinds."""
    pos = [r[key] for r in rows if r.get(key) is not None and not r["answerable"]]
    neg = [r[key] for r in rows if r.get(key) is not None and r["answerable"]]
    if not pos or not neg:
        return None
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def load_variants(path: Path | None) -> dict[str, tuple[str, str]]:
    """``{"name": {"system": ..., "user": ...}}`` from a JSON file; none by default."""
    if path is None:
        return {}
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {name: (v["system"], v["user"]) for name, v in data.items()}


def report(rows: Sequence[dict[str, Any]], variants: Iterable[str]) -> str:
    checked = [r for r in rows if r.get("p_engine") is not None]
    lines = [f"{len(rows)} questions replayed, {len(checked)} reached the check "
             f"({sum(not r['answerable'] for r in checked)} of them unanswerable)"]
    drift = [abs(r["p_engine"] - r["p_recorded"]) for r in checked if r["p_recorded"] is not None]
    if drift:
        lines.append(f"engine check vs the run's: max |difference| {max(drift):.3f}")
    for key in ["p_engine", *variants]:
        a = auc(checked, key)
        lines.append(f"  {key:<20} ROC AUC {'–' if a is None else f'{a:.3f}'}")
    return "\n".join(lines)
