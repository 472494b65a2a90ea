"""The answer pipeline's model steps, as functions that can be swapped.

The pipeline (``rag.answer.pipeline.Answerer``) builds every prompt and
makes every decision in code; it asks a model four things only:

- ``choose(messages, schema)``: the evidence choice, a JSON reply under
  ``schema`` (``{"ids": [...]}``);
- ``verdict(question, quotes)``: P("no": the quoted sentences do not answer
  the question), the answer decision's check, in the wording of setting
  ``verdict_prompt`` (default ``check``), graded where the backend gives
  option probabilities (the local model), else 1.0 or 0.0 from its
  constrained yes/no reply;
- ``check(question, quotes)``: the same in prompts ``check_*`` always, for
  one paper's own sentences (which papers answer a "which papers" question,
  and the synthesis check), whose own models are fit on that wording;
- ``write(messages, max_tokens, temperature)``: the streamed synthesis.

``llm_steps`` makes them from an LLM; an eval (``eval.replay``) or a test
swaps one through ``Answerer.steps`` instead of patching the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rag.answer.evidence import CHECK_SCHEMA, parse_verdict
from rag.llm import LLM
from rag.prompts import render

Messages = list[dict]
CHOICE_TOKENS = 48  # a JSON list of at most a few ids
VERDICT_TOKENS = 12  # {"answer": "yes"}
VERDICT_PREFIX = '{"answer": "'  # the check's reply up to its yes/no


@dataclass
class Steps:
    """The four model steps of an answer (see the module docstring)."""

    choose: Callable[[Messages, dict], str]
    verdict: Callable[[str, str], float | None]
    check: Callable[[str, str], float | None]
    write: Callable[[Messages, int, float], Iterator[str]]


def check_messages(question: str, quotes: str, prompt: str = "check") -> Messages:
    """A check's prompt (``prompts/{prompt}_system.txt`` and ``_user.txt``):
    only the quoted sentences and the question."""
    return [{"role": "system", "content": render(f"{prompt}_system")},
            {"role": "user", "content": render(f"{prompt}_user", quotes=quotes, question=question)}]


def graded_no(model: LLM, msgs: Messages) -> float | None:
    """P("no") of a yes/no check prompt: graded where the backend gives option
    probabilities, else 1.0 or 0.0 from its constrained reply (None: no reply)."""
    graded = getattr(model, "option_probabilities", None)
    probs = graded(msgs, VERDICT_PREFIX, ("yes", "no")) if graded else None
    if probs is not None:
        return probs["no"]
    reply = "".join(model.stream_chat(msgs, max_tokens=VERDICT_TOKENS, temperature=0.0,
                                      json_schema=CHECK_SCHEMA))
    verdict = parse_verdict(reply)
    return None if verdict is None else float(not verdict)


def llm_steps(llm: Callable[[], LLM], verdict_prompt: Callable[[], str] = lambda: "check") -> Steps:
    """The steps asked of the LLM that ``llm()`` returns (loaded lazily, once);
    the verdict in the wording ``prompts/{verdict_prompt()}_*`` (read per
    question, so that a settings change applies)."""

    def choose(messages: Messages, schema: dict) -> str:
        return "".join(llm().stream_chat(messages, max_tokens=CHOICE_TOKENS, temperature=0.0,
                                         json_schema=schema))

    def verdict(question: str, quotes: str) -> float | None:
        return graded_no(llm(), check_messages(question, quotes, verdict_prompt()))

    def check(question: str, quotes: str) -> float | None:
        return graded_no(llm(), check_messages(question, quotes))

    def write(messages: Messages, max_tokens: int, temperature: float) -> Iterator[str]:
        yield from llm().stream_chat(messages, max_tokens=max_tokens, temperature=temperature)

    return Steps(choose=choose, verdict=verdict, check=check, write=write)
