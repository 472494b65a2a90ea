"""What the indexed corpus says about a question's words and names, read
from the retriever's current snapshot and cached per snapshot: the papers a
question names (among the hits or anywhere in the index), whether a name is
a field's common term, stemmed terms as the BM25 index reads them, how much
of a question's IDF a sentence holds, and whether a term is distinctive.

``IndexTerms`` is a base of ``rag.answer.pipeline.Answerer`` (which passes these to
the rules and to ``rag.answer.verify``); it needs ``self.retriever`` and
``self.settings``.
"""

from __future__ import annotations

import math

from rag.answer import reading
from rag.config import Settings
from rag.retrieve import HybridRetriever
from rag.text import STOP, stemmer
from rag.types import SearchHit


class IndexTerms:
    """Word and name statistics of the indexed corpus (see the module docstring)."""

    retriever: HybridRetriever
    settings: Settings

    def _corpus_texts(self) -> list[str]:
        """Titles and abstracts of the indexed papers (cached per catalog snapshot)."""
        snap = self.retriever.snapshot()
        if getattr(self, "_texts_for", None) is not snap:
            self._texts = [p.title + " " + p.abstract for p in snap.papers.values()]
            self._texts_for = snap
        return self._texts

    def _named(self, q: str, hits: list[SearchHit]) -> dict[str, list[int]]:
        """The papers the question names (``reading.named_papers`` over this corpus);
        asked up to four times per answer, so the last result is kept."""
        key = (q, tuple(h.paper.paper_id for h in hits), id(self._corpus_texts()))
        last = getattr(self, "_named_last", None)  # (key, result), swapped as one (UI threads)
        if last is None or last[0] != key:
            last = key, reading.named_papers(q, hits, self._corpus_texts(),
                                             self.settings.evidence.generic_name_papers)
            self._named_last = last
        return last[1]

    def _catalog_named(self, q: str) -> dict[str, list[str]]:
        """Papers anywhere in the index that the question names: a name that is
        the whole of one or two papers' own names (``reading.own_names``; a
        word inside a descriptive title, "CLIP" in "A Closer Look at Backdoor
        Attacks on CLIP", does not count here): name -> paper ids. A paper
        named by its short name is that paper even when the search ranks it
        below the hits."""
        papers = self.retriever.snapshot().papers
        out: dict[str, list[str]] = {}
        names = reading.question_names(q)
        # Runs of capitalised words ("the Speak Easy paper"), as whole own names too.
        names |= {n: p for n, p in reading.phrase_names(q).items() if n not in names}
        for name, pat in names.items():
            # An own name is written in its title or abstract: a substring test
            # first, so that only those few papers' names are worked out.
            ids = [pid for pid, p in papers.items() if (name in p.title or name in p.abstract)
                   and any(pat.fullmatch(n) for n in reading.own_names(p))]
            # A field's common term (LLM, GPU) names no paper. Tested last: it reads
            # every abstract, and most capitalised runs ("Which Papers Study")
            # are no paper's own name.
            if 1 <= len(ids) <= 2 and not self._generic(name):
                out[name] = ids
        return reading.longest_names(out)

    def _one_named(self, q: str, hits: list[SearchHit], pinned: list[str]) -> bool:
        """The question names exactly one of the hits and is not pinned to
        papers: then only a comparison word, or a second paper described
        beside it, makes it a comparison (``reading.compares_papers``)."""
        return not pinned and len({i for v in self._named(q, hits).values() for i in v}) == 1

    def _named_target(self, q: str, hits: list[SearchHit]) -> int | None:
        """The first hit the question names, if any: the paper a decline is about."""
        return next(iter(sorted(i for v in self._named(q, hits).values() for i in v)), None)

    def _generic(self, name: str, limit: int | None = None) -> bool:
        """Whether a name is in more than ``limit`` indexed papers (default: a
        field's common term, setting generic_name_papers); cached per snapshot."""
        texts = self._corpus_texts()
        limit = self.settings.evidence.generic_name_papers if limit is None else limit
        cache = self.__dict__.setdefault("_generic_cache", {})
        key = (id(texts), name, limit)
        if key not in cache:
            cache[key] = reading.is_generic(name, texts, limit)
        return cache[key]

    def _terms(self, text: str) -> set[str]:
        """Stemmed content terms, as the BM25 index reads them."""
        lex = self.retriever.snapshot().lexical
        return set(lex.terms(text)) if lex else stemmer().terms(text)

    def _lexical_overlap(self, question: str, sentence: str, *, unseen: bool = False) -> float:
        """The IDF-weighted share of the question's indexed terms that the
        sentence holds (0..1); 0 without a BM25 index. ``unseen``: a distinctive
        question term that no indexed chunk holds counts too, at the weight of a
        term in one chunk (a question about "zebra migration" is not covered by
        an abstract that holds "migration")."""
        lex = self.retriever.snapshot().lexical
        if lex is None:
            return 0.0
        # Both weightings of the question are kept until the question changes
        # (an answer asks for each several times, alternating).
        if getattr(self, "_idf_for", None) != (lex, question):
            self._idf_for, self._idf = (lex, question), {}
        weights = self._idf.get(unseen)
        if weights is None:
            rare = math.log(max(2, int(lex.bm25.scores["num_docs"])))  # -log(share of one chunk)
            weights = self._idf[unseen] = {
                t: (-math.log(lex.share(t)) if lex.share(t) > 0 else rare)
                for t in set(lex.terms(question)) if lex.share(t) > 0 or (unseen and self._distinctive(t))}
        total = sum(weights.values())
        if not total:
            return 0.0
        return sum(weights.get(t, 0.0) for t in set(lex.terms(sentence))) / total

    def _unseen(self, question: str) -> list[str]:
        """The question's content terms that no indexed chunk holds ("crop" in a
        question about crop yields over ML papers); none without a BM25 index."""
        lex = self.retriever.snapshot().lexical
        if lex is None:
            return []
        return sorted(t for t in set(lex.terms(question)) if lex.share(t) == 0 and self._distinctive(t))

    def _distinctive(self, term: str) -> bool:
        """A term held by few indexed chunks (not "model", "method", "propose"),
        and no question word ("what", "does")."""
        lex = self.retriever.snapshot().lexical
        if lex is None:
            return term not in STOP
        if getattr(self, "_stops_for", None) is not lex:
            self._stops, self._stops_for = set(lex.terms(" ".join(STOP))), lex
        return term not in self._stops and lex.share(term) <= self.settings.evidence.coverage_common_share
