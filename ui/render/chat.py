"""Chat rendering (re-exported by ``ui.render``): the streamed and final answer
Markdown, citation and search-hit cards with marked quotes, and the messages
and panels of a failed or stopped answer. Untrusted text is escaped with
``ui.render.base`` before any markup is added.

Evidence is shown once: the chat carries the answer (its own Markdown
rendered, clickable [n]) and a compact list of the cited papers; the verbatim
quotes, with their marked spans, scores and abstracts, live in the side panel,
where a researcher checks a claim against its source. Quotes repeated under
the answer pushed the synthesis out of the 520 px chat.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence

from rag.text import sentence_spans
from rag.types import (
    Answer,
    Citation,
    SearchHit,
    SentenceSupport,
)
from ui.render.base import (
    _abstract_details,
    _authors,
    content_words,
    esc,
    md_escape,
    md_model_text,
    paper_heading,
    safe_url,
    strip_markers,
)

# --------------------------------------------------------------------- chat

_URL = re.compile(r"https?://[^\s<>\"'`\[\]{}|\\^]+", re.IGNORECASE)


def md_with_links(text: str, *, model: bool = False) -> str:
    """Untrusted text for Markdown whose http(s) URLs become clean links (no
    stray backslashes: a bare URL would be auto-linked with its escapes)."""
    esc_fn = md_model_text if model else md_escape
    out: list[str] = []
    last = 0
    for m in _URL.finditer(text or ""):
        url = m.group(0).rstrip(".,;:!?)")
        url = url.replace("\\", "")
        if not safe_url(url):
            continue
        out.append(esc_fn(text[last:m.start()]))
        target = url.replace("(", "%28").replace(")", "%29").replace(" ", "%20")
        label = re.sub(r"([\\`*_\[\]])", r"\\\1", url)
        out.append(f"[{html.escape(label, quote=True)}]({html.escape(target, quote=True)})")
        last = m.start() + len(m.group(0).rstrip(".,;:!?)"))
    out.append(esc_fn(text[last:]))
    return "".join(out)


def cite_link(n: int) -> str:
    """A clickable [n]: the page script scrolls to and highlights card n."""
    return f"[\\[{n}\\]](#aqa-cite-{n})"


def _cite_links(nums: Sequence[int]) -> str:
    return "".join(" " + cite_link(n) for n in nums)


STREAM_CURSOR = " ▌"
STOPPED_MARKDOWN = ("**Stopped — no answer was checked.** The unchecked draft was "
                    "discarded; ask again for a checked answer.")


def stream_markdown(partial: str) -> str:
    """Chat content while tokens stream in: the draft (its markers literal) and a cursor."""
    return md_model_text(partial) + STREAM_CURSOR


def sentence_markdown(s: SentenceSupport) -> str:
    body = md_with_links(strip_markers(s.text), model=True)
    if getattr(s, "withdrawn", False):
        reason = getattr(s, "withdrawn_reason", None) or "it failed a check after it was shown"
        return f"~~{body}~~ *(withdrawn: {md_escape(reason)})*"
    body += _cite_links(s.citations)
    if s.supported:
        return body
    return f"⚠️ *{body}* *(unsupported)*"


def match_words(value: float, strong: float, partial: float) -> str:
    if value >= strong:
        return "strong"
    return "partial" if value >= partial else "weak"


def relevance_words(c: Citation) -> str:
    """Does this paper answer the question? In words, with the number."""
    words = getattr(c, "relevance_words", None)
    if not isinstance(words, str):
        words = f"{match_words(c.relevance, 0.5, 0.35)} match"
    return f"{words} to the question ({c.relevance:.2f})"


def support_words(score: float) -> str:
    """Does the quote back the answer's sentence? In words, with the number."""
    return f"{match_words(score, 0.6, 0.45)} ({score:.2f})"


def _quotes(c: Citation, answer: Answer) -> list[str]:
    quotes = list(getattr(c, "quotes", None) or [])
    if not quotes:
        quotes = [e.text for e in getattr(answer, "evidence", []) if e.number == c.number]
    return quotes or ([c.snippet] if c.snippet else [])


def _decline_markdown(answer: Answer) -> str:
    kind = getattr(answer, "decline_kind", None)
    if kind == "missing_detail":
        lines = ["**The paper is in the collection, but its abstract does not state this.**"]
    elif kind == "absent":
        lines = ["**Nothing in the loaded collection is about this.**"]
    elif kind == "not_confirmed":
        lines = ["**Not confirmed.** The closest passages in the collection are quoted in "
                 "the panel; they may not answer the question."]
        if answer.citations:
            lines += ["", _cited_list(answer)]
        return "\n".join(lines)
    else:
        lines = ["**The loaded collection does not answer this question.**"]
    if answer.decline_reason:
        lines.append(md_with_links(answer.decline_reason))
    cited = {c.number for c in answer.citations}
    if kind == "missing_detail" and answer.evidence and answer.evidence[0].number in cited:
        ev = answer.evidence[0]
        title = next(c.paper.display_title for c in answer.citations if c.number == ev.number)
        lines += ["", f"Closest sentence: {cite_link(ev.number)} **{md_escape(title)}** "
                  "(quoted in the panel)."]
    elif kind == "missing_detail" and answer.evidence:
        ev = answer.evidence[0]
        title = next((c.paper.display_title for c in answer.citations if c.number == ev.number),
                     None) or next((h.paper.display_title for h in answer.retrieved
                                    if h.paper.paper_id == ev.paper_id), ev.paper_id)
        lines += ["", f"Closest sentence, from **{md_escape(title)}**:",
                  f"> {md_with_links(ev.text)}"]
    elif answer.nearest:
        lines += ["", "Nearest papers in the collection (none answers it):"]
        for hit in answer.nearest:
            lines.append(f"- {md_escape(hit.paper.display_title)} (score {hit.score:.2f})")
    return "\n".join(lines)


def answer_markdown(answer: Answer) -> str:
    """Final chat message: the synthesis (clickable [n], withdrawn sentences
    struck through with the reason), then the compact list of cited papers.
    A decline says which kind."""
    parts: list[str] = []
    interpreted = getattr(answer, "interpreted", None)
    if interpreted:
        parts.append(f"_Interpreted as: {md_escape(interpreted)}_")
    if answer.declined:
        parts.append(_decline_markdown(answer))
        return "\n\n".join(parts)
    if answer.sentences:
        body = " ".join(sentence_markdown(s) for s in answer.sentences)
    else:
        body = md_with_links(strip_markers(answer.text), model=True)
    parts.append(body)
    unsupported = sum(1 for s in answer.sentences
                      if not s.supported and not getattr(s, "withdrawn", False))
    if unsupported:
        parts.append(
            f"⚠️ {unsupported} of {len(answer.sentences)} sentence(s) could not be matched "
            "to a retrieved abstract."
        )
    if answer.citations:
        parts.append(_cited_list(answer))
    return "\n\n".join(parts)


def _cited_list(answer: Answer) -> str:
    """The compact list under an answer: [n] title, venue and year; the
    quotes are in the panel (``citations_panel``)."""
    lines = ["**Cited papers** (quotes in the panel):"]
    for c in answer.citations:
        p = c.paper
        where = " ".join(str(x) for x in (p.venue, p.year) if x)
        lines.append(f"- {cite_link(c.number)} {md_escape(p.display_title)}"
                     + (f" · {md_escape(where)}" if where else ""))
    return "\n".join(lines)


def error_markdown(message: str) -> str:
    return f"⚠️ **Could not answer:** {md_escape(message)}"


def mark_spans(passage: str, quotes: Iterable[str], claims: Iterable[str] = ()) -> str:
    """Escaped ``passage`` with the matched evidence span(s) in <mark>: each
    quote found in it verbatim; failing that, the one sentence sharing the
    most content words with the claims. Never every shared word."""
    passage = passage or ""
    low = passage.lower()
    spans: list[tuple[int, int]] = []
    for q in quotes:
        q = (q or "").strip()
        i = low.find(q.lower()) if q else -1
        if i >= 0:
            spans.append((i, i + len(q)))
    if not spans:
        targets: set[str] = set()
        for c in claims:
            targets |= content_words(c)
        best, best_n = None, 0
        for a, b in sentence_spans(passage):
            n = len(content_words(passage[a:b]) & targets)
            if n > best_n:
                best, best_n = (a, b), n
        if best and best_n >= 2:
            spans.append(best)
    spans.sort()
    out, last = [], 0
    for a, b in spans:
        if a < last:
            continue
        out.append(esc(passage[last:a]))
        out.append(f'<mark class="aqa-span">{esc(passage[a:b])}</mark>')
        last = b
    out.append(esc(passage[last:]))
    return "".join(out)


def citation_card(c: Citation, sentences: Sequence[SentenceSupport],
                  quotes: Sequence[str] | None = None) -> str:
    """One cited paper: title, authors, its verbatim evidence quote(s) with the
    matched span marked, and two plain-words scores: does the paper answer
    the question (relevance), does the quote back the claim (support)."""
    cited = [s.text for s in sentences if c.number in s.citations]
    quotes = list(quotes if quotes is not None else (getattr(c, "quotes", None) or []))
    authors = _authors(c.paper)
    if quotes:
        body = "".join(f'<blockquote class="aqa-passage">{mark_spans(q, [q])}</blockquote>'
                       for q in quotes[:3])
    else:
        body = f'<blockquote class="aqa-passage">{mark_spans(c.snippet, [], cited)}</blockquote>'
    scores = [f'<span class="aqa-relevance">Answers the question: {esc(relevance_words(c))}'
              "</span>"]
    if cited:
        scores.append(f'<span class="aqa-support">Quote backs the claim: '
                      f"{esc(support_words(c.score))}</span>")
    return (
        f'<div class="aqa-card" id="aqa-cite-{c.number}" data-cite="{c.number}">'
        f'<div class="aqa-card-head"><span class="aqa-num">[{c.number}]</span> '
        f"{paper_heading(c.paper)}</div>"
        + (f'<div class="aqa-authors">{esc(authors)}</div>' if authors else "")
        + body
        + f'<div class="aqa-score">{" · ".join(scores)}</div>'
        f"{_abstract_details(c.paper)}</div>"
    )


def hit_card(hit: SearchHit) -> str:
    authors = _authors(hit.paper)
    return (
        f'<div class="aqa-card"><div class="aqa-card-head">{paper_heading(hit.paper)}</div>'
        + (f'<div class="aqa-authors">{esc(authors)}</div>' if authors else "")
        + f'<div class="aqa-score">retrieval score {hit.score:.2f}</div>'
        f"{_abstract_details(hit.paper)}</div>"
    )


def citations_panel(answer: Answer | None, *, preliminary: bool = False) -> str:
    """Side panel for the latest answer: cited papers with their quotes (also
    while the synthesis is still being written), or the nearest ones."""
    if answer is None:
        return '<div class="aqa-empty">Cited papers appear here after an answer.</div>'
    if answer.declined:
        kind = getattr(answer, "decline_kind", None)
        if kind == "not_confirmed" and answer.citations:
            cards = "".join(citation_card(c, [], _quotes(c, answer)) for c in answer.citations)
            return ('<div class="aqa-panel"><h4>Closest passages (not confirmed to answer '
                    f"the question)</h4>{cards}</div>")
        if kind == "missing_detail" and answer.citations:
            cards = "".join(citation_card(c, [], _quotes(c, answer)) for c in answer.citations)
            return ('<div class="aqa-panel"><h4>The paper asked about (its abstract does not '
                    f"state the detail)</h4>{cards}</div>")
        if not answer.nearest:
            return '<div class="aqa-empty">No paper in the collection is close to this question.</div>'
        cards = "".join(hit_card(h) for h in answer.nearest)
        return f'<div class="aqa-panel"><h4>Nearest papers (not an answer)</h4>{cards}</div>'
    if not answer.citations:
        return '<div class="aqa-empty">The answer cites no paper.</div>'
    cards = "".join(citation_card(c, answer.sentences, _quotes(c, answer))
                    for c in answer.citations)
    head = "Cited papers (the answer is being written…)" if preliminary else "Cited papers"
    return f'<div class="aqa-panel"><h4>{head}</h4>{cards}</div>'


def stopped_panel() -> str:
    return ('<div class="aqa-empty aqa-stopped">Stopped: no answer was checked, so no paper '
            "is cited. Ask again for a checked answer.</div>")


def error_panel(message: str) -> str:
    return f'<div class="aqa-error">⚠️ {esc(message)}</div>'
