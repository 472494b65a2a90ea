"""The answer pipeline's model steps, as functions that can be swapped.

The pipeline (``rag.answer.pipeline.Answerer``) builds every prompt and
makes every decision in code; it asks a model three things only:

- ``choose(messages, schema)``: the evidence choice, a JSON reply under
  ``schema`` (``{"ids": [...]}``);
- ``check(question, quotes)``: P("no": the quoted sentences do not answer
  the question), graded where the backend gives option probabilities (the
  local model), else 1.0 or 0.0 from its constrained yes/no reply;
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
    """The three model steps of an answer (see the module docstring)."""

    choose: Callable[[Messages, dict], str]
    check: Callable[[str, str], float | None]
    write: Callable[[Messages, int, float], Iterator[str]]


def check_messages(question: str, quotes: str) -> Messages:
    """The check's prompt: only the quoted sentences and the question."""
    return [{"role": "system", "content": render("check_system")},
            {"role": "user", "content": render("check_user", quotes=quotes, question=question)}]


def llm_steps(llm: Callable[[], LLM]) -> Steps:
    """The steps asked of the LLM that ``llm()`` returns (loaded lazily, once)."""

    def choose(messages: Messages, schema: dict) -> str:
        return "".join(llm().stream_chat(messages, max_tokens=CHOICE_TOKENS, temperature=0.0,
                                         json_schema=schema))

    def check(question: str, quotes: str) -> float | None:
        model = llm()
        msgs = check_messages(question, quotes)
        graded = getattr(model, "option_probabilities", None)
        probs = graded(msgs, VERDICT_PREFIX, ("yes", "no")) if graded else None
        if probs is not None:
            return probs["no"]
        reply = "".join(model.stream_chat(msgs, max_tokens=VERDICT_TOKENS, temperature=0.0,
                                          json_schema=CHECK_SCHEMA))
        verdict = parse_verdict(reply)
        return None if verdict is None else float(not verdict)

    def write(messages: Messages, max_tokens: int, temperature: float) -> Iterator[str]:
        yield from llm().stream_chat(messages, max_tokens=max_tokens, temperature=temperature)

    return Steps(choose=choose, check=check, write=write)
