"""The answer pipeline with the real default local model (Qwen2.5-Coder-1.5B
through llama.cpp), the real MiniLM and a real Chroma index of the bundled
corpus: the behaviours a researcher relies on, end to end."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from rag.config import Settings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def qwen_engine(real_index_dir, tmp_path_factory):
    import shutil

    from rag.engine import Engine

    d = tmp_path_factory.mktemp("qwen") / "idx"
    shutil.copytree(real_index_dir, d)
    eng = Engine(Settings(_env_file=None, data_dir=d, local_model="qwen2.5-1.5b"))
    eng.warm()
    return eng


def _id(eng, name: str) -> str:
    from rag.text import short_title

    return next(p.paper_id for p in eng.papers() if short_title(p.title) == name)


def test_follow_up_the_second_one(qwen_engine):
    eng = qwen_engine
    shield, melon = _id(eng, "ShieldAgent"), _id(eng, "MELON")
    history = [
        {"role": "user", "content": "Which papers protect LLM agents?"},
        {"role": "assistant", "content": "ShieldAgent [1] and MELON [2].", "papers": [shield, melon]},
    ]
    a = eng.ask("How is the second one evaluated?", history=history)
    assert a.interpreted and "MELON" in a.interpreted
    assert a.pinned == [melon]
    if not a.declined:
        assert {c.paper.paper_id for c in a.citations} == {melon}
    else:  # the only acceptable decline is "its abstract does not state it"
        assert a.decline_kind == "missing_detail"


def test_summarize_pinned_paper(qwen_engine):
    from rag.types import Filters

    eng = qwen_engine
    pid = _id(eng, "ShieldAgent")
    a = eng.ask("Summarize this paper", filters=Filters(paper_ids=[pid]))
    assert not a.declined, a.text
    assert a.citations and all(c.paper.paper_id == pid for c in a.citations)
    for quote in a.citations[0].quotes:
        assert quote in a.citations[0].paper.abstract  # verbatim evidence


def test_absent_topic_is_declined(qwen_engine):
    # A topic no paper in the collection touches. (A half-covered topic, such as
    # weather forecasting *with graph neural networks*, can still draw an answer
    # quoting the GNN paper: a known limit, see docs/architecture.md "Known limits".)
    # Declined outright, or (P(answered) between the two cut-offs; 0.54 with the
    # 2026-12-06 fit) shown as the closest passages, marked as not confirmed:
    # never an answer, never "the abstract of X does not state this".
    a = qwen_engine.ask("Which papers predict protein 3D structure from amino-acid sequences?")
    assert a.declined and a.decline_kind in ("absent", "not_confirmed"), a.text
    if a.decline_kind == "absent":
        assert "nearest papers" in a.text and not a.citations
    else:
        assert a.text.startswith("Not confirmed:") and not a.sentences


def test_missing_detail_decline_quotes_the_closest_sentence(qwen_engine):
    a = qwen_engine.ask("How many GPUs were used to pre-train MeCo?")
    assert a.declined and a.decline_kind == "missing_detail", a.text
    assert "MeCo" in a.text
    quoted = re.search(r"“(.+)”", a.text).group(1)
    # "MeCo" is the name its abstract gives it; the title is "Metadata Conditioning …"
    meco = next(h.paper for h in a.retrieved
                if h.paper.title.startswith("Metadata Conditioning Accelerates"))
    assert quoted in meco.abstract


def test_cli_prints_the_answer_once(real_index_dir, tmp_path):
    import shutil

    d = tmp_path / "idx"
    shutil.copytree(real_index_dir, d)
    hist = tmp_path / "h.json"
    hist.write_text(json.dumps([
        {"role": "user", "content": "Which paper proposes a guardrail agent?"},
        {"role": "assistant", "content": "ShieldAgent does [1]."},
    ]))
    out = subprocess.run(
        [sys.executable, "-m", "rag.cli", "ask", "--data-dir", str(d), "--history", str(hist),
         "What benchmark does it introduce?"],
        capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "AQA_LOCAL_MODEL": "qwen2.5-1.5b"},
    )
    assert out.returncode == 0, out.stderr
    assert "Interpreted as: What benchmark does ShieldAgent introduce?" in out.stdout
    # Not a terminal: the final text only, printed once (no raw stream first).
    body = out.stdout.split("Evidence:")[0]
    first = [s for s in re.split(r"(?<=[.!?])\s+", body) if len(s) > 30]
    for s in first:
        assert out.stdout.count(s) == 1


def test_graded_check_separates_answered_from_not(qwen_engine):
    """The local model's option probabilities: a sentence stating the asked
    value is judged answering, the same sentence for an unstated detail is not
    (by the check's wording and, ranked the same way, by the ``check_strict``
    alternative), and the generated answer afterwards still streams (the
    context is restored)."""
    from rag.answer.steps import check_messages

    llm = qwen_engine.answerer.llm
    quote = ('From the abstract of ShieldAgent: [1] "Experiments show that ShieldAgent outperforms '
             'prior methods by 11.3% on average with a high recall of 90.1%."')

    def p_no(q: str, prompt: str) -> float:
        probs = llm.option_probabilities(check_messages(q, quote, prompt), '{"answer": "', ("yes", "no"))
        assert probs is not None and abs(sum(probs.values()) - 1) < 1e-6
        return probs["no"]

    stated, unstated = "What recall does ShieldAgent reach?", "How many GPUs does ShieldAgent need to train?"
    assert p_no(stated, "check") < 0.5 < p_no(unstated, "check")
    assert p_no(stated, "check_strict") < p_no(unstated, "check_strict")
    a = qwen_engine.ask("By how much does ShieldAgent outperform prior methods on average?")
    assert not a.declined and "11.3" in a.text


README_QUESTION = "Which papers defend LLM agents against prompt injection, and how do they differ?"


def test_readme_example_cites_only_the_defenses(qwen_engine):
    """The README's example: MELON (a defense against indirect prompt
    injection) is cited and quoted by its own abstract; the papers on other
    problems that retrieval ranks next (backdoors on CLIP, jailbreak
    responses) are never cited, and no shown sentence names a paper it does
    not cite. ShieldAgent (a guardrail against malicious instructions, whose
    abstract never says prompt injection) may be cited too; with two papers,
    a shown sentence cites both (how they differ)."""
    eng = qwen_engine
    a = eng.ask(README_QUESTION)
    assert not a.declined, a.text
    cited = {c.paper.paper_id for c in a.citations}
    assert _id(eng, "MELON") in cited
    assert cited <= {_id(eng, "MELON"), _id(eng, "ShieldAgent")}, [c.paper.title for c in a.citations]
    for c in a.citations:
        assert c.quotes and all(q in c.paper.abstract for q in c.quotes)
    shown = [s for s in a.sentences if not s.withdrawn]
    assert shown
    names = {h.paper.name for h in a.retrieved} - {c.paper.name for c in a.citations}
    for s in shown:
        assert not any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", s.text) for n in names), s.text
    if len(cited) == 2:
        both = {c.number for c in a.citations}
        assert any(set(s.citations) >= both for s in shown), [(s.text, s.citations) for s in shown]
    rule = next(r for r in a.rules if r.name == "paper_relevance")
    assert {p["paper_id"] for p in rule.data["papers"]} >= cited


def test_a_paper_named_by_its_short_name_is_answered_from_it(qwen_engine):
    # "Speak Easy" is neither camel-case nor an acronym: the question names the
    # paper by the words before its title's colon (issue #26: once declined as
    # "nothing in the collection").
    eng = qwen_engine
    a = eng.ask("What does the Speak Easy paper find?")
    rule = next(r for r in a.rules if r.name == "named_in_catalog")
    assert rule.fired and "Speak Easy" in rule.data["names"], rule
    assert not a.declined, a.text
    assert {c.paper.paper_id for c in a.citations} == {_id(eng, "Speak Easy")}, a.text
