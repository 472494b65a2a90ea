"""Follow-up questions: resolve references ("it", "the second one", "both",
"how does it compare to X") against the papers cited earlier in the
conversation, deterministically, and say how the question was interpreted.

History is a list of chat messages ``{"role", "content"}``; an assistant
message may carry ``"papers"``: the ids of the papers its answer cited, in
citation order (the UI and ``aqa ask --history`` pass them). Without that
list, papers are recognised by their titles in the assistant's text.

No LLM is involved: a rewrite by a 1.5B model was measured to lose names,
and a reference that cannot be resolved is better left visible than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rag.text import NAME, WORD
from rag.types import Paper, RuleFiring

History = Sequence[Mapping]

_ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4,
             "1st": 0, "2nd": 1, "3rd": 2, "4th": 3, "former": 0}
_NOUN = r"(?:one|paper|work|method|approach|model|study|system|framework|article)"
ORDINAL_REF = re.compile(
    rf"\b(?:the\s+)?(first|second|third|fourth|fifth|1st|2nd|3rd|4th|last|former|latter)"
    rf"(?:\s+{_NOUN})?(?![\w-])(?!\s+(?:step|stage|time|half|part|phase|layer|order|author))",
    re.IGNORECASE,
)
PLURAL_REF = re.compile(
    rf"\b(?:both(?:\s+(?:of\s+them|{_NOUN}s?))?|each\s+of\s+them|either\s+of\s+them|"
    rf"(?:these|those|the)\s+(?:two|three|four)(?:\s+{_NOUN}s)?|(?:these|those)\s+{_NOUN}s|"
    r"them|they|their)\b",
    re.IGNORECASE,
)
SINGULAR_REF = re.compile(
    rf"\b(?:(?:this|that|the\s+same)\s+{_NOUN}|the\s+(?:paper|method|approach|work|model)|"
    r"its|it)\b",
    re.IGNORECASE,
)
# "How well does the defense work?", "What do the authors claim?": a role the
# cited paper plays, resolved to "<paper>'s defense" (the noun is kept, since
# it may narrow the question). "the system prompt" or "the attack success
# rate" name something else: a following word of the noun phrase blocks it.
ROLE_REF = re.compile(
    r"\b(?:the|this|that)\s+(defen[cs]e|technique|algorithm|framework|system|agent|benchmark|"
    r"architecture|pipeline|tool|authors)\b"
    r"(?=\s*(?:[?.,;:!]|$)|\s+(?:is|are|was|were|does|do|did|can|could|has|have|had|work\w*|use\w*|"
    r"need\w*|handle\w*|perform\w*|compar\w*|scal\w*|achiev\w*|report\w*|claim\w*|evaluat\w*|"
    r"differ\w*|requir\w*|improv\w*|built|based|designed|trained|tested|implemented|applied|"
    r"deployed|proposed|introduced|on|in|with|for|to|against|at|by|from|of|and|or|than)\b)",
    re.IGNORECASE,
)
# With one cited paper, "they" are its authors: "Which datasets do they use?".
THEY_REF = re.compile(r"\b(?:(do|are|have|were)\s+)?(they)\b|\b(their)\b|(?<!\bof\s)\b(them)\b",
                      re.IGNORECASE)
_AGREE = {"do": "does", "are": "is", "have": "has", "were": "was"}
# "What about the other one?": the paper an earlier answer cited besides the last one's.
# A question about the collection ("Which papers attack web agents rather than
# defend them?") is a new search: a bare "them/they/their" in it refers to
# something the question itself names, not to the papers of the last answer.
COLLECTION_QUESTION = re.compile(
    r"^\s*(?:(?:which|what)\s+(?:other\s+)?(?:papers|works|studies|articles)\b|"
    r"(?:are\s+there|is\s+there|find|list|show\s+me)\s+(?:any\s+)?(?:papers|works|studies)\b)",
    re.IGNORECASE)
BARE_PLURAL = frozenset({"them", "they", "their"})
OTHER_REF = re.compile(rf"\bthe\s+other(?:\s+{_NOUN})?\b(?!\s+(?:hand|way)\b)", re.IGNORECASE)
# "Which one is faster?", "Which of the two needs training?": a choice among the cited papers.
WHICH_REF = re.compile(rf"\bwhich\s+(?:one|of\s+(?:the|these|those)\s+(?:two|three|four|{_NOUN}s))\b",
                       re.IGNORECASE)
COMPARE = re.compile(r"\b(?:compare[sd]?|comparison|differ\w*|versus|vs\.?|than|relate)\b",
                     re.IGNORECASE)
# "What about its limitations?" / "And the datasets?": elliptical follow-ups.
ELLIPSIS = re.compile(r"^\s*(?:and|what about|how about|also)\b|"
                      r"\b(?:tell me more|more (?:details?|about (?:it|this|that|them))|elaborate|"
                      r"go on|explain (?:more|further|that|this)|expand on)\b", re.IGNORECASE)


@dataclass
class Resolution:
    """A question as interpreted against the conversation."""

    question: str  # the interpreted question (unchanged when nothing resolved)
    pinned: list[str] = field(default_factory=list)  # answer only from these papers
    include: list[str] = field(default_factory=list)  # retrieve these besides the search
    rule: RuleFiring | None = None

    @property
    def papers(self) -> list[str]:
        return self.pinned or self.include


def _turns(history: History, papers: Mapping[str, Paper]) -> list[list[str]]:
    """Per assistant turn, newest first: the ids of the papers it cited, in citation order."""
    out = []
    for msg in reversed(list(history)):
        if msg.get("role") != "assistant":
            continue
        ids = [p for p in (msg.get("papers") or []) if p in papers]
        out.append(list(dict.fromkeys(ids)) or _titles_in(str(msg.get("content") or ""), papers))
    return out


def cited_papers(history: History, papers: Mapping[str, Paper]) -> list[str]:
    """Ids of the papers the last assistant turn cited, in citation order."""
    turns = _turns(history, papers)
    return turns[0] if turns else []


def other_papers(history: History, papers: Mapping[str, Paper]) -> list[str]:
    """"The other one": papers an earlier answer cited that the last one did not
    (after "Which papers…?" cited A and B and "How is the first one evaluated?" cited A)."""
    turns = _turns(history, papers)
    for earlier in turns[1:]:
        rest = [p for p in earlier if p not in turns[0]]
        if rest:
            return rest
    return []


def in_asked_order(prior: list[str], history: History, papers: Mapping[str, Paper]) -> list[str]:
    """``prior`` (the last answer's papers) in the order the last question named
    them, when it named two or more of them ("Compare MELON and ShieldAgent":
    "the former" is MELON, whatever the answer cited first); else unchanged."""
    last_q = next((str(m.get("content") or "") for m in reversed(list(history))
                   if m.get("role") == "user"), "")
    named = [p for p in _titles_in(last_q, {p: papers[p] for p in prior})]
    if len(named) < 2:
        return prior
    return named + [p for p in prior if p not in named]


def _titles_in(text: str, papers: Mapping[str, Paper]) -> list[str]:
    """Papers whose (short) title appears in a text, in order of appearance."""
    found: list[tuple[int, str]] = []
    for pid, p in papers.items():
        name = p.name
        if len(name) < 3:
            continue
        m = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)
        if m:
            found.append((m.start(), pid))
    return [pid for _, pid in sorted(found)]


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _plural_ref(text: str, collection: bool) -> re.Match | None:
    """The first plural reference to earlier papers; in a question about the
    collection, a bare pronoun is the question's own (see COLLECTION_QUESTION)."""
    for m in PLURAL_REF.finditer(text):
        if not (collection and m.group(0).lower() in BARE_PLURAL):
            return m
    return None


def resolve(question: str, history: History, papers: Mapping[str, Paper]) -> Resolution:
    """Replace references to earlier papers with their names, and say which
    papers the question is about.

    A question that, once resolved, still asks about something else ("how does
    it compare to ShieldAgent?") keeps the referenced papers as must-include
    results of a normal search; otherwise the question is pinned to them."""
    prior = cited_papers(history, papers) if history else []
    if not prior:
        return Resolution(question)

    ordered = in_asked_order(prior, history, papers)

    def pick(m: re.Match) -> list[str]:
        word = m.group(1).lower()
        if word in ("last", "latter"):
            return [ordered[-1]]
        i = _ORDINALS.get(word, 0)
        return [ordered[i]] if i < len(ordered) else []

    chosen: list[str] = []
    text = question
    how = ""
    collection = bool(COLLECTION_QUESTION.search(question))
    m = ORDINAL_REF.search(text)
    if (o := OTHER_REF.search(text)) and (ids := other_papers(history, papers)[:1]):
        chosen, how = ids, f"'{o.group(0)}' of an earlier answer"
        text = text[: o.start()] + papers[ids[0]].name + text[o.end():]
    elif m and (ids := pick(m)):
        chosen, how = ids, f"ordinal '{m.group(0)}'"
        text = text[: m.start()] + papers[ids[0]].name + text[m.end():]
    elif (m := _plural_ref(text, collection)) and len(prior) > 1:
        chosen, how = prior[:4], f"plural '{m.group(0)}'"
        names = [papers[p].name for p in chosen]
        word = m.group(0).lower()
        repl = _join(names) + ("'s" if word == "their" else "")
        text = text[: m.start()] + repl + text[m.end():]
    elif (m := WHICH_REF.search(text)) and len(prior) > 1:
        chosen, how = prior[:4], f"choice '{m.group(0)}'"
        repl = m.group(0)[:5] + " of " + _join([papers[p].name for p in chosen])
        text = text[: m.start()] + repl + text[m.end():]
    elif m := SINGULAR_REF.search(text):
        chosen, how = prior[:1], f"reference '{m.group(0)}'"
        name = papers[chosen[0]].name
        repl = name + "'s" if m.group(0).lower() == "its" else name
        text = text[: m.start()] + repl + text[m.end():]
    elif m := ROLE_REF.search(text):
        chosen, how = prior[:1], f"reference '{m.group(0)}'"
        text = text[: m.start()] + f"{papers[chosen[0]].name}'s {m.group(1)}" + text[m.end():]
    elif not collection and (m := THEY_REF.search(text)) and len(prior) == 1:
        word = next(g for g in m.groups()[1:] if g)
        chosen, how = prior, f"reference '{word}'"
        name = papers[prior[0]].name
        verb = (_AGREE[m.group(1).lower()] + " ") if m.group(1) else ""
        repl = verb + (name + "'s" if word.lower() == "their" else name)
        text = text[: m.start()] + repl + text[m.end():]
    elif ELLIPSIS.search(text) or len(WORD.findall(text)) <= 2:
        # "What about the MELON paper?" is about the cited paper it names.
        named = _titles_in(text, {p: papers[p] for p in prior})
        chosen, how = (named or prior[:4]), "elliptical follow-up"
        if not named:
            text = f"{text.rstrip(' ?')} ({_join([papers[p].name for p in chosen])})?"
    if not chosen:
        return Resolution(question, rule=RuleFiring(
            "follow_up_reference", False, "no reference to earlier papers"))
    # Anything else named, or a comparison, needs a search beyond the chosen papers.
    rest = text
    for p in chosen:
        rest = rest.replace(papers[p].name, " ")
    others = [n for n in NAME.findall(rest) if len(n) > 2]
    open_ended = bool(others) or bool(COMPARE.search(question))
    rule = RuleFiring("follow_up_reference", True,
                      f"{how} -> {', '.join(papers[p].name for p in chosen)}"
                      + ("; searched beyond them" if open_ended else "; pinned"))
    text = text[:1].upper() + text[1:]
    if open_ended:
        return Resolution(text, include=chosen, rule=rule)
    return Resolution(text, pinned=chosen, rule=rule)
