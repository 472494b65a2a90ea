r"""How well evidence backs a claim: the one claim scorer of the answer's
synthesis check (``rag.answer.verify``) and Compare's attribution
(``rag.attribution``).

A claim is a sentence written by the model; its evidence is the abstract
text it rests on. Two measures, both used by both callers:

- ``support`` in [0, 1]: half the share of the claim's content words (its
  paper's title words aside: naming a paper is no evidence) found in the
  evidence, half the best cosine of the claim and one evidence sentence.
- ``unstated_specifics``: the numbers and names the claim asserts that the
  evidence does not contain. The question is no evidence: a benchmark the
  question names but the abstract does not is a fabrication when a claim
  pairs it with the paper. Evidence is read as typeset too: its LaTeX
  (``$\mathcal{W}_2$``) states the name an answer writes as "W2".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from rag.text import math_read, normalise, specifics, stemmer, strip_markers, values

LEXICAL_WEIGHT = 0.5  # the rest is the best cosine to one evidence sentence


def lexical_support(claim: str, evidence: str, title: str = "") -> float:
    """Share of the claim's content words (stemmed; ``title``'s own words
    aside) that ``evidence`` holds; 1.0 for a claim with no other words."""
    stem = stemmer()
    terms = stem.terms(claim) - stem.terms(title)
    return len(terms & stem.terms(evidence)) / len(terms) if terms else 1.0


def combine(lexical: float, cosine: float) -> float:
    """The support score from its two parts (a negative cosine counts as 0)."""
    return round(LEXICAL_WEIGHT * lexical + (1 - LEXICAL_WEIGHT) * max(cosine, 0.0), 3)


def support(embedder, claim: str, evidence: Sequence[str], title: str = "") -> float:
    """How well the ``evidence`` sentences back ``claim`` (module docstring)."""
    lex = lexical_support(claim, " ".join(evidence), title)
    if not evidence:
        return combine(lex, 0.0)
    v = np.asarray(embedder.embed_texts([claim, *evidence]))
    return combine(lex, float((v[1:] @ v[0]).max()))


def unstated_specifics(sentence: str, evidence: Sequence[str],
                       generic: Callable[[str], bool] = lambda name: False) -> list[str]:
    """The numbers and names ``sentence`` asserts that ``evidence`` does not
    contain (a number counts as stated when its value is: "3,000" for "3K";
    a field's common term, ``generic(name)``, such as LLM, is no claim)."""
    joined = " ".join(evidence)
    known, read = normalise(joined), math_read(joined)
    known_values = values(joined)
    text, _ = strip_markers(sentence)
    return sorted(x for x in specifics(text) if normalise(x) not in known
                  and math_read(x) not in read
                  and not (values(x) and values(x) <= known_values)
                  and not (not any(ch.isdigit() for ch in x) and generic(x)))
