"""The human report of an eval run: ``report.md`` plus PNG plots.

Plots (matplotlib, Agg backend, so no display is needed):
``metrics_by_type.png`` (mean of each headline metric per question type) and
``latency.png`` (histograms of search, retrieval, time-to-first-token and
total latency). The Markdown holds the headline table with 95% bootstrap
CIs, the per-type table, latency percentiles, a per-question pass/fail table
with answers and citations, and the details of every failed question.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

PLOT_METRICS: tuple[str, ...] = (
    "hit@1", "hit@k", "mrr", "ndcg@k", "citation_precision", "citation_recall",
    "must_include_recall", "support_rate", "pass",
)
TYPE_TABLE_METRICS: tuple[str, ...] = (
    "hit@1", "hit@k", "recall@k", "mrr", "ndcg@k", "citation_precision",
    "citation_recall", "followup_resolved", "pinned_ok",
    "must_include_recall", "support_rate", "fabrication_rate", "correct_decline",
    "wrong_decline", "floor_correct_decline", "floor_wrong_decline", "pass",
)
LATENCY_LABELS: dict[str, str] = {
    "search_ms": "search (no LLM)",
    "retrieval_ms": "retrieval inside ask",
    "evidence_ms": "evidence chosen (quotes shown)",
    "ttft_ms": "first synthesis token",
    "total_ms": "total answer",
}


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def md_cell(text: Any, limit: int | None = None) -> str:
    """Text safe inside a Markdown table cell."""
    s = " ".join(str(text or "").split()).replace("|", "\\|")
    if limit and len(s) > limit:
        s = s[: limit - 1].rstrip() + "…"
    return s


def metric_label(name: str, k: int) -> str:
    return name.replace("@k", f"@{k}")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def plot_metrics_by_type(summary: dict[str, Any], path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = summary.get("k", 5)
    types = list(summary["by_type"])
    names = [m for m in PLOT_METRICS if m in summary["overall"]
             and summary["overall"][m]["mean"] is not None]
    if not types or not names:
        return False
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(types) + 3), 4.5))
    width = 0.8 / len(names)
    cmap = plt.get_cmap("tab10")
    for j, name in enumerate(names):
        xs, ys = [], []
        for i, t in enumerate(types):
            v = summary["by_type"][t][name]["mean"]
            if v is not None:
                xs.append(i + (j - (len(names) - 1) / 2) * width)
                ys.append(v)
        ax.bar(xs, ys, width=width, label=metric_label(name, k), color=cmap(j % 10))
    ax.set_xticks(range(len(types)))
    ax.set_xticklabels([f"{t}\n(n={summary['n_by_type'][t]})" for t in types])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean")
    ax.set_title("Metrics by question type")
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.15))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_latency(records: Sequence[dict[str, Any]], path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {
        key: [r["timings"][key] for r in records if r.get("timings", {}).get(key) is not None]
        for key in LATENCY_LABELS
    }
    series = {k: v for k, v in series.items() if v}
    if not series:
        return False
    fig, axes = plt.subplots(1, len(series), figsize=(4 * len(series), 3.4), squeeze=False)
    for ax, (key, vals) in zip(axes[0], series.items(), strict=True):
        ax.hist(vals, bins=min(20, max(5, len(vals) // 2)), color="#4C72B0")
        ax.set_title(LATENCY_LABELS[key], fontsize=10)
        ax.set_xlabel("ms")
    axes[0][0].set_ylabel("questions")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def rule_table(records: Sequence[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """rule name -> (times it fired on answerable questions, on unanswerable ones),
    from the ``rules`` trace each answer carries. A rule whose firings are
    mostly on answerable questions hurts more than it helps."""
    out: dict[str, list[int]] = {}
    for r in records:
        ans = r.get("answer") or {}
        answerable = r.get("answerable", r.get("type") != "unanswerable")
        for rule in ans.get("rules") or []:
            if rule.get("fired"):
                c = out.setdefault(rule["name"], [0, 0])
                c[0 if answerable else 1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def render_markdown(summary: dict[str, Any], records: Sequence[dict[str, Any]],
                    plots: dict[str, bool]) -> str:
    k = summary.get("k", 5)
    run = summary.get("run", {})
    st = run.get("settings", {})
    corpus = run.get("corpus", {})
    use_llm = summary.get("use_llm", True)
    lines = [f"# Eval run {run.get('label') or ''}".rstrip(), ""]
    lines += [
        f"- Question set: `{run.get('set')}` ({summary['n_questions']} questions; "
        f"sha256 {str(run.get('set_sha256'))[:12]})",
        f"- Corpus: {corpus.get('papers', '?')} papers, {corpus.get('chunks', '?')} chunks; "
        f"embeddings `{corpus.get('embed_model', st.get('embed_provider'))}`; "
        f"LLM `{corpus.get('llm_model', '?') if use_llm else 'none (retrieval only)'}`",
        f"- Retriever `{st.get('retriever')}` (centroid_weight {st.get('centroid_weight')}, bm25_weight {st.get('bm25_weight')}, "
        f"relevance_floor {st.get('relevance_floor')}, chunk_tokens {st.get('chunk_tokens')}, "
        f"top_k {k})",
        f"- Finished {run.get('finished')} in {fmt(run.get('seconds'), 1)} s; "
        f"errors: {summary.get('n_errors', 0)}",
    ]
    if run.get("extra_corpus"):
        lines.append(f"- Extra (distractor) corpus: {', '.join(run['extra_corpus'])}")
    if run.get("argv"):
        lines.append(f"- Command: `{' '.join(run['argv'])}`")
    lines += ["", "## Headline metrics", ""]
    rows = []
    for name, v in summary["overall"].items():
        ci = v.get("ci95")
        rows.append([metric_label(name, k), fmt(v["mean"]),
                     f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "–", v["n"]])
    lines += _table(["metric", "mean", "95% CI (bootstrap)", "n"], rows)
    lines += ["", "Retrieval metrics are paper-level over questions with gold papers; "
              "citation precision over answers with citations; decline rates over "
              "unanswerable (correct) / answerable (wrong) questions.", ""]

    lines += ["## By question type", ""]
    names = [m for m in TYPE_TABLE_METRICS
             if m in summary["overall"] and summary["overall"][m]["mean"] is not None]
    if use_llm:  # with real answers, the floor-only declines are a detail
        names = [m for m in names if not m.startswith("floor_")]
    rows = [
        [t, summary["n_by_type"][t]] + [fmt(summary["by_type"][t][m]["mean"]) for m in names]
        for t in summary["by_type"]
    ]
    lines += _table(["type", "n"] + [metric_label(m, k) for m in names], rows)
    if plots.get("metrics_by_type"):
        lines += ["", "![metrics by type](metrics_by_type.png)"]

    lines += ["", "## Latency (ms)", ""]
    lat = summary["latency_ms"]
    rows = [
        [LATENCY_LABELS.get(key, key), lat[key]["n"], fmt(lat[key]["p50"], 1),
         fmt(lat[key]["p95"], 1), fmt(lat[key]["mean"], 1), fmt(lat[key]["max"], 1)]
        for key in LATENCY_LABELS if key in lat and lat[key]["n"]
    ]
    lines += _table(["", "n", "p50", "p95", "mean", "max"], rows)
    if plots.get("latency"):
        lines += ["", "![latency](latency.png)"]

    if use_llm:
        fab = [(r["id"], f) for r in records for f in r["metrics"].get("fabricated") or []]
        shown = sum(int(r["metrics"].get("fabricated_sentences") is not None) for r in records)
        lines += ["", "## Fabrication audit", "",
                  f"Shown synthesis sentences stating a name or number their cited evidence "
                  f"lacks: **{len(fab)}** (in {shown} answered questions; target 0).", ""]
        if fab:
            lines += _table(["id", "sentence", "not in its evidence"],
                            [[md_cell(i), md_cell(f["text"], 160), ", ".join(f["missing"])]
                             for i, f in fab])

    fired = rule_table(records)
    if fired:
        lines += ["", "## Decision rules (which fired, on which questions)", ""]
        lines += ["Declining rules that fire mostly on answerable questions hurt more than they help.", ""]
        lines += _table(["rule", "fired", "on answerable", "on unanswerable"],
                        [[name, a + u, a, u] for name, (a, u) in sorted(fired.items())])

    lines += ["", "## Per question", ""]
    header = ["id", "type", "pass", "gold rank", f"hit@{k}", "top-1 retrieved"]
    if use_llm:
        header += ["must-incl.", "cit. P", "cit. R", "support", "declined", "answer", "citations"]
    rows = []
    for r in records:
        m = r["metrics"]
        row = [md_cell(r["id"]), r["type"], "✅" if m.get("pass") else "❌",
               fmt(m.get("first_gold_rank")), fmt(m.get("hit@k"), 0),
               md_cell(r["retrieved"][0].get("title"), 50) if r["retrieved"] else "–"]
        if use_llm:
            ans = r.get("answer") or {}
            cites = "; ".join(
                f"[{c['number']}] {md_cell(c.get('title'), 40)}{' (gold)' if c['gold'] else ''}"
                for c in r.get("cited") or []
            )
            row += [fmt(m.get("must_include_recall"), 2), fmt(m.get("citation_precision"), 2),
                    fmt(m.get("citation_recall"), 2), fmt(m.get("support_rate"), 2),
                    "yes" if m.get("declined") else "no",
                    md_cell(r.get("error") or ans.get("answer"), 160), cites or "–"]
        rows.append(row)
    lines += _table(header, rows)

    failed = [r for r in records if not r["metrics"].get("pass")]
    lines += ["", f"## Failed questions ({len(failed)})", ""]
    for r in failed:
        lines += [f"### {r['id']} ({r['type']})", "", f"**Q:** {md_cell(r['question'])}", ""]
        gold = ", ".join(f"{g['path']}#{g['ordinal']}" for g in r["gold"]) or "none"
        lines.append(f"- Gold: {gold}")
        if r.get("must_include"):
            lines.append(f"- Must include: {', '.join(r['must_include'])}")
        top = "; ".join(
            f"{h['rank']}. {md_cell(h.get('title'), 60)}{' (gold)' if h['gold'] else ''}"
            for h in r["retrieved"][:5]
        )
        lines.append(f"- Retrieved: {top or 'nothing'}")
        ans = r.get("answer")
        if ans:
            if ans.get("declined"):
                lines.append(f"- Declined: {md_cell(ans.get('decline_reason'))}")
            lines.append(f"- Answer: {md_cell(r.get('error') or ans.get('answer'))}")
        if r.get("notes"):
            lines.append(f"- Notes: {md_cell(r['notes'])}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def write_report(out_dir: Path, summary: dict[str, Any],
                 records: Sequence[dict[str, Any]]) -> Path:
    plots = {
        "metrics_by_type": plot_metrics_by_type(summary, out_dir / "metrics_by_type.png"),
        "latency": plot_latency(records, out_dir / "latency.png"),
    }
    path = out_dir / "report.md"
    path.write_text(render_markdown(summary, records, plots), encoding="utf-8")
    return path
