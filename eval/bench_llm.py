"""The ``llm`` section of ``aqa bench`` (re-exported by ``eval.bench``): model load
time, time to first token, answer latency and tokens/s through
``engine.ask_stream``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from eval import metrics as M
from eval.bench_common import BenchContext, _r, peak_rss_mb, say
from rag.progress import Progress

# --- LLM -----------------------------------------------------------------------


def bench_llm(ctx: BenchContext) -> dict[str, Any]:
    from rag.config import BUNDLED_CORPUS
    from rag.llm import make_llm

    over: dict[str, Any] = {}
    if ctx.cfg["llm_max_tokens"]:
        over["max_tokens"] = ctx.cfg["llm_max_tokens"]
    t0 = time.perf_counter()
    llm = ctx.llm or make_llm(ctx.settings(**over))
    list(llm.stream_chat([{"role": "user", "content": "Say OK."}], max_tokens=1, temperature=0.0))
    load_s = time.perf_counter() - t0
    eng = ctx.engine(ctx.root / f"idx-57-{ctx.provider}", llm=llm, **over)
    eng.ingest([BUNDLED_CORPUS], prune=True, progress=False)
    say(f"\n## LLM ({llm.name}; load + 1 token {load_s:.2f} s)")
    prefill = prefill_rate(llm, eng)
    if prefill:
        say(f"- prompt reading (prefill): {prefill['prefill_tokens_per_s']} tok/s; "
            f"{prefill['prefill_tokens']} tokens take {prefill['prefill_s']} s, the floor under "
            "any first token that reads an evidence prompt of that length")
    questions = llm_questions(ctx, eng, ctx.cfg["llm_questions"])
    runs = []
    bar = Progress(len(questions), verb="asked", unit="question", every=1, desc="bench llm")
    for q in questions:
        n_tok, t_first, t_last, answer = 0, None, None, None
        t0 = time.perf_counter()
        for ev in eng.ask_stream(q):
            if ev.kind == "token":
                now = time.perf_counter()
                t_first = t_first or now
                t_last = now
                n_tok += 1
            elif ev.kind == "answer":
                answer = ev.answer
        gen_s = (t_last - t_first) if t_first and t_last else 0.0
        r = {
            "question": q,
            # Seen by the caller: from ask_stream() to the first token event.
            "ttft_client_s": _r(t_first - t0) if t_first else None,
            "ttft_s": _r(answer.timings.ttft_ms / 1000 if answer and answer.timings.ttft_ms
                         else None),
            "retrieval_ms": answer.timings.retrieval_ms if answer else None,
            # When the ranked papers and their closest sentences can be shown.
            "passages_s": _r(answer.timings.passages_ms / 1000 if answer and answer.timings.passages_ms
                             else None),
            # When the chosen, checked evidence (the quotes) is shown, before the synthesis.
            "evidence_s": _r(answer.timings.evidence_ms / 1000 if answer and answer.timings.evidence_ms
                             else None),
            "total_s": _r(time.perf_counter() - t0),
            "tokens": n_tok,
            "tokens_per_s": _r((n_tok - 1) / gen_s) if gen_s > 0 and n_tok > 1 else None,
            "declined": answer.declined if answer else None,
            "answer": (answer.text[:200] if answer else None),
        }
        runs.append(r)
        say(f"- TTFT {r['ttft_s']} s, {r['tokens']} tokens at {r['tokens_per_s']} tok/s, "
            f"total {r['total_s']} s: {q}")
        bar.step(f"TTFT {r['ttft_s']} s")
    bar.close()
    def pct(key: str, q: int) -> float | None:
        vals = [r[key] for r in runs if r[key] is not None]
        return _r(M.percentile(vals, q)) if vals else None

    out = {"model": llm.name, "load_s": round(load_s, 2), "questions": len(runs), "runs": runs,
           "ttft_s_median": pct("ttft_s", 50), "ttft_s_p50": pct("ttft_s", 50),
           "ttft_s_p95": pct("ttft_s", 95),
           "ttft_client_s_p50": pct("ttft_client_s", 50),
           "ttft_client_s_p95": pct("ttft_client_s", 95),
           "answer_s_p50": pct("total_s", 50), "answer_s_p95": pct("total_s", 95),
           "passages_s_p50": pct("passages_s", 50), "passages_s_p95": pct("passages_s", 95),
           "evidence_s_p50": pct("evidence_s", 50), "evidence_s_p95": pct("evidence_s", 95),
           "tokens_per_s_median": pct("tokens_per_s", 50),
           **(prefill or {}),
           "peak_rss_mb": peak_rss_mb()}
    say(f"TTFT p50 {out['ttft_s_p50']} s, p95 {out['ttft_s_p95']} s (caller-side p50 "
        f"{out['ttft_client_s_p50']} s); answer p50 {out['answer_s_p50']} s, p95 "
        f"{out['answer_s_p95']} s over {len(runs)} questions; passages shown p50 "
        f"{out['passages_s_p50']} s, evidence shown p50 {out['evidence_s_p50']} s")
    return out


PREFILL_TOKENS = 450  # about one evidence prompt (9 numbered sentences, instructions, question)


def prefill_rate(llm: Any, eng: Any, n: int = PREFILL_TOKENS) -> dict[str, Any] | None:
    """The local model's prompt-reading speed: ``n`` tokens of abstract text
    evaluated from an empty context (None for servers and fakes)."""
    load = getattr(llm, "load", None)
    if load is None:
        return None
    model = load()
    text = " ".join(p.abstract for p in eng.papers())
    toks = model.tokenize(text.encode("utf-8"))[:n]
    if len(toks) < n:
        return None
    model.reset()
    t0 = time.perf_counter()
    model.eval(toks)
    dt = time.perf_counter() - t0
    model.reset()
    return {"prefill_tokens": n, "prefill_s": _r(dt), "prefill_tokens_per_s": _r(n / dt)}


def llm_questions(ctx: BenchContext, eng: Any, n: int) -> list[str]:
    """``n`` questions: the answerable ones of the eval set first (what users
    ask), then questions drawn from the corpus."""
    from eval.dataset import DEFAULT_SET, load_questions

    path = Path(ctx.set_path or DEFAULT_SET)
    qs: list[str] = []
    if path.is_file():  # single-turn, unpinned: what ask_stream(q) alone can answer
        qs = [q.question for q in load_questions(path) if q.answerable
              and not getattr(q, "history", None) and not getattr(q, "pinned", None)][:n]
    if len(qs) < n:
        qs += eng.example_questions(n - len(qs))
    return qs[:n]
