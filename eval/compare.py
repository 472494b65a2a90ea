"""``aqa eval compare RUN_A RUN_B``: metric deltas and flipped questions.

Deltas are B − A for every metric both runs report, overall and per type,
plus latency p50/p95. A question "flips" when its pass/fail (or its
retrieval hit@k) differs between the runs; only questions present in both
runs (by id) are compared, and ids in just one are listed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval.report import fmt, md_cell, metric_label
from eval.runner import load_run


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def _signed(v: float | None, digits: int = 3) -> str:
    return "–" if v is None else f"{v:+.{digits}f}"


def _numerics(h: dict[str, Any]) -> tuple:
    """What of a host changes the numbers (not the CPU's marketing name)."""
    return tuple(h.get(k) for k in ("isa", "onnxruntime", "llama_cpp"))


def _host(h: dict[str, Any]) -> str:
    return f"{h.get('cpu', '?')} [{' '.join(h.get('isa', []))}]" + (
        f", llama.cpp {h['llama_cpp']}" if h.get("llama_cpp") else "")


def compare_runs(run_a: Path | str, run_b: Path | str) -> dict[str, Any]:
    sa, ra = load_run(run_a)
    sb, rb = load_run(run_b)
    metrics = [m for m in sa["overall"] if m in sb["overall"]]
    overall = {
        m: {"a": sa["overall"][m]["mean"], "b": sb["overall"][m]["mean"],
            "delta": _delta(sa["overall"][m]["mean"], sb["overall"][m]["mean"])}
        for m in metrics
    }
    by_type: dict[str, dict[str, Any]] = {}
    for t in sorted(set(sa["by_type"]) & set(sb["by_type"])):
        by_type[t] = {
            m: _delta(sa["by_type"][t][m]["mean"], sb["by_type"][t][m]["mean"]) for m in metrics
        }
    latency = {}
    for key in sa.get("latency_ms", {}):
        la, lb = sa["latency_ms"][key], sb.get("latency_ms", {}).get(key)
        if lb and la["n"] and lb["n"]:
            latency[key] = {q: {"a": la[q], "b": lb[q], "delta": _delta(la[q], lb[q])}
                            for q in ("p50", "p95")}
    a_by_id = {r["id"]: r for r in ra}
    b_by_id = {r["id"]: r for r in rb}
    common = [i for i in a_by_id if i in b_by_id]
    flips: dict[str, list[dict[str, Any]]] = {"fixed": [], "broken": [],
                                              "retrieval_fixed": [], "retrieval_broken": []}
    for qid in common:
        ma, mb = a_by_id[qid]["metrics"], b_by_id[qid]["metrics"]
        item = {"id": qid, "type": a_by_id[qid]["type"], "question": a_by_id[qid]["question"],
                "rank_a": ma.get("first_gold_rank"), "rank_b": mb.get("first_gold_rank")}
        if bool(ma.get("pass")) != bool(mb.get("pass")):
            flips["fixed" if mb.get("pass") else "broken"].append(item)
        ha, hb = ma.get("hit@k"), mb.get("hit@k")
        if ha is not None and hb is not None and ha != hb:
            flips["retrieval_fixed" if hb else "retrieval_broken"].append(item)
    ha, hb = sa.get("run", {}).get("host"), sb.get("run", {}).get("host")
    return {
        "a": str(run_a), "b": str(run_b), "k": sb.get("k", sa.get("k")),
        "hosts": {"a": ha, "b": hb, "differ": bool(ha and hb and _numerics(ha) != _numerics(hb))},
        "overall": overall, "by_type": by_type, "latency_ms": latency, "flips": flips,
        "only_in_a": [i for i in a_by_id if i not in b_by_id],
        "only_in_b": [i for i in b_by_id if i not in a_by_id],
        "n_common": len(common),
    }


def render_comparison(c: dict[str, Any]) -> str:
    k = c.get("k") or 5
    lines = ["# Eval comparison", "", f"- A: `{c['a']}`", f"- B: `{c['b']}`",
             f"- {c['n_common']} questions in both runs"]
    hosts = c.get("hosts") or {}
    if hosts.get("differ"):
        lines.append(f"- **Different hosts**: A on {_host(hosts['a'])}, B on {_host(hosts['b'])}; "
                     "the same code can answer differently there, so flips may not be the change's")
    lines += ["", "## Overall (Δ = B − A)", "",
             "| metric | A | B | Δ |", "|---|---|---|---|"]
    for m, v in c["overall"].items():
        lines.append(f"| {metric_label(m, k)} | {fmt(v['a'])} | {fmt(v['b'])} | "
                     f"{_signed(v['delta'])} |")
    if c["latency_ms"]:
        lines += ["", "## Latency (ms)", "", "| | p50 A | p50 B | Δ p50 | p95 A | p95 B | Δ p95 |",
                  "|---|---|---|---|---|---|---|"]
        for key, v in c["latency_ms"].items():
            lines.append(
                f"| {key} | {fmt(v['p50']['a'], 1)} | {fmt(v['p50']['b'], 1)} | "
                f"{_signed(v['p50']['delta'], 1)} | {fmt(v['p95']['a'], 1)} | "
                f"{fmt(v['p95']['b'], 1)} | {_signed(v['p95']['delta'], 1)} |"
            )
    if c["by_type"]:
        ms = [m for m in c["overall"] if any(c["by_type"][t][m] is not None for t in c["by_type"])]
        lines += ["", "## Δ by question type", "",
                  "| type | " + " | ".join(metric_label(m, k) for m in ms) + " |",
                  "|---|" + "---|" * len(ms)]
        for t, row in c["by_type"].items():
            lines.append(f"| {t} | " + " | ".join(_signed(row[m]) for m in ms) + " |")
    titles = {"fixed": "Fixed (fail → pass)", "broken": "Broken (pass → fail)",
              "retrieval_fixed": f"Retrieval fixed (miss → hit@{k})",
              "retrieval_broken": f"Retrieval broken (hit@{k} → miss)"}
    for key, title in titles.items():
        items = c["flips"][key]
        lines += ["", f"## {title}: {len(items)}", ""]
        for it in items:
            lines.append(f"- `{it['id']}` ({it['type']}, gold rank {fmt(it['rank_a'])} → "
                         f"{fmt(it['rank_b'])}): {md_cell(it['question'], 120)}")
    if c["only_in_a"] or c["only_in_b"]:
        lines += ["", f"Only in A: {', '.join(c['only_in_a']) or '–'}; "
                  f"only in B: {', '.join(c['only_in_b']) or '–'}"]
    return "\n".join(lines) + "\n"
