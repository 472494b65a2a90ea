"""Text helpers shared by the answer layer: sentence splitting, ``[n]``
citation markers, stop-words and stemmed content terms, the specifics
(numbers, names) a claim asserts, a title's short form, and LaTeX: its
readable form (``clean_latex``, the one LaTeX cleaner) and its matching form
(``unlatex``, inside ``normalise``).

One module so that every stage splits sentences and reads markers the same way.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

MARKER = re.compile(r"\s*\[(\d+(?:\s*[,;]\s*\d+)*)\]")
# A sentence ends at . ! ? (or their full-width forms) and whitespace before a
# capital in any script
# (Latin, Greek, Cyrillic: a planted instruction must not ride inside the
# previous sentence by starting with a Cyrillic capital), a digit, a quote or
# bracket, or inline markup (an HTML tag or a LaTeX command).
_UPPER = "A-ZÀ-ÖØ-ÞΆ-ΫЀ-ЯＡ-Ｚ"
_SENT_END = re.compile(
    rf"(?<=[.!?。．！？])\s+(?=[{_UPPER}0-9\"'(\[“‘]|<[A-Za-z!/]|\\[A-Za-z])")
# A period that ends an abbreviation ends no sentence: "(vs. 0.54 for FLAC)".
_ABBREV_END = re.compile(r"(?:^|[\s(])(?:vs|e\.g|i\.e|cf|et al|approx|resp|Fig|Eq|Sec)\.$",
                         re.IGNORECASE)
WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]+|\d+(?:\.\d+)?%?")
NUMBER = re.compile(r"(?<![A-Za-z])\d+(?:[.,]\d+)?\s?(?:%|x|×|k|K|M|B)?(?![A-Za-z])")
# Name-like tokens: an inner capital (ShieldAgent, AgentDojo) or an acronym (MELON, GPT-4).
NAME = re.compile(r"\b(?:[A-Za-z]*[A-Z][a-z0-9]*[A-Z0-9][A-Za-z0-9\-]*|[A-Z]{2,}[A-Za-z0-9\-]*)\b")

STOP = frozenset(
    """a an the of and or to in on for with by from as at is are was were be been being this that
    these those it its their they them which what who whom how why when where does do did can could
    would should may might will shall has have had not no than then so such into over under about
    also both each other more most less very paper papers study studies propose proposes proposed
    approach method methods work works use uses used using based new show shows shown our we us
    answer question excerpt excerpts abstract abstracts authors seen stated state states mention
    mentions mentioned described describes according shown discussed discusses found given
    provided reported reports collection""".split()
)
# Words a finished sentence never ends on ("This is stated in and.").
DANGLING = frozenset(
    """a an the of and or to in on for with by from as at than but nor via whereas while its their
    this these that""".split()
)
# The model saying the evidence lacks the answer, in its usual phrasings.
NOT_STATED = re.compile(
    r"\bNOT[ _]FOUND\b|\b(?:is|are) not (?:mentioned|stated|specified|provided|given|reported|"
    r"described|discussed|included|available)\b|\bdo(?:es)? not (?:mention|specify|state|provide|"
    r"report|include|describe|give|contain|discuss)\b|\bno (?:information|mention|details?)\b|"
    r"\bcannot be (?:determined|found|answered)\b|\bnot (?:enough|sufficient) information\b",
    re.IGNORECASE,
)


def split_sentences(text: str) -> list[str]:
    """Sentences of a text; list bullets and numbering are dropped, and a bare
    marker split off the end of a sentence is joined back to it."""
    parts: list[str] = []
    for block in re.split(r"\n+", text.strip()):
        block = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", block).strip()
        if block:
            parts += [s.strip() for s in _SENT_END.split(block) if s.strip()]
    merged: list[str] = []
    for s in parts:
        if merged and (MARKER.fullmatch(s) or _ABBREV_END.search(merged[-1])):
            merged[-1] += " " + s
        else:
            merged.append(s)
    return merged


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) in ``text`` of each sentence ``split_sentences`` finds
    (a sentence it rewrote, such as a dropped bullet, is left out)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for sent in split_sentences(text):
        i = text.find(sent, pos)
        if i >= 0:
            spans.append((i, i + len(sent)))
            pos = i + len(sent)
    return spans


def strip_markers(text: str) -> tuple[str, list[int]]:
    """The text without ``[n]`` markers, and the marker numbers in order of use."""
    nums: list[int] = []
    for m in MARKER.finditer(text):
        nums += [int(x) for x in re.split(r"\s*[,;]\s*", m.group(1))]
    clean = MARKER.sub("", text).strip()
    clean = re.sub(r"\s+([.,;:])", r"\1", clean)
    return clean, list(dict.fromkeys(nums))


# ------------------------------------------------------------------ LaTeX
# Two forms of LaTeX-bearing text, for two uses: ``clean_latex`` is how
# abstracts are read and shown (quotes, snippets, derived labels); ``unlatex``
# is only the matching key of ``normalise``/``values`` (it writes "2x", as
# answers do), never shown.

_GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "eta": "η", "theta": "θ", "lambda": "λ", "mu": "μ", "pi": "π", "rho": "ρ", "sigma": "σ",
    "tau": "τ", "phi": "φ", "varphi": "φ", "omega": "ω", "Omega": "Ω", "Delta": "Δ",
    "Theta": "Θ", "Sigma": "Σ", "Lambda": "Λ", "Gamma": "Γ", "Phi": "Φ", "kappa": "κ",
    "xi": "ξ", "zeta": "ζ", "nu": "ν", "chi": "χ", "psi": "ψ",
}
_SYMBOLS = {
    "times": "×", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "sim": "~", "approx": "≈",
    "pm": "±", "cdot": "·", "infty": "∞", "ell": "ℓ", "to": "→", "rightarrow": "→",
    "neq": "≠", "ne": "≠", "log": "log", "in": "∈", "sqrt": "√", "ldots": "…", "dots": "…",
    "cdots": "…", "%": "%", "&": "&", "_": "_", "#": "#", "$": "$",
}
# Accents typeset over their argument: ``\tilde{O}`` reads "Õ" (a combining mark).
_ACCENTS = {"tilde": "\u0303", "widetilde": "\u0303", "hat": "\u0302", "widehat": "\u0302",
            "bar": "\u0304", "overline": "\u0304", "vec": "\u20d7", "dot": "\u0307"}
# Commands that only size or space what follows: read as nothing, not as a word
# ("\left(" is "(", not "left(").
_SILENT = {"left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr",
           "biggl", "biggr", "displaystyle", "textstyle", "quad", "qquad", "limits"}
_LATEX_CMD = re.compile(r"\\([A-Za-z]+|[%&_#$,;:! ])")
_LATEX_ACCENT = re.compile(r"\\(" + "|".join(_ACCENTS) + r")(?![A-Za-z])\s*(?:\{([^{}]*)\}|([A-Za-z0-9]))")


def clean_latex(text: str) -> str:
    r"""Readable text for LaTeX in abstracts: ``$<7$\%`` -> ``<7%``,
    ``$\mathcal{O}(n^{2})$`` -> ``O(n^2)``, ``$2\times$`` -> ``2×``."""
    if "\\" not in text and "$" not in text:
        return text
    out = re.sub(r"\\(?:mathcal|mathbf|mathrm|mathbb|textbf|textit|text|emph|texttt|"
                 r"operatorname|boldsymbol|mathit|mathsf)\s*\{([^{}]*)\}", r"\1", text)
    out = re.sub(r"([\^_])\{([^{}]*)\}", r"\1\2", out)
    out = _LATEX_ACCENT.sub(lambda m: unicodedata.normalize(
        "NFC", (m.group(2) or m.group(3) or "") + _ACCENTS[m.group(1)]), out)

    def cmd(m: re.Match) -> str:
        name = m.group(1)
        if name in (",", ";", ":", " "):
            return " "
        if name == "!" or name in _SILENT:
            return ""
        return _GREEK.get(name) or _SYMBOLS.get(name, name)

    out = _LATEX_CMD.sub(cmd, out)
    out = out.replace("$", "").replace("{", "").replace("}", "")
    return re.sub(r"[ \t]{2,}", " ", out)


def unlatex(text: str) -> str:
    """The matching form, not a display form (that is ``clean_latex``):
    abstracts write 44\\% and $2\\times$; answers write 44% and 2x."""
    return text.replace("\\%", "%").replace("$", "").replace("\\times", "x")


def normalise(text: str) -> str:
    """Lower-cased, LaTeX-free, whitespace-free text for substring checks."""
    return re.sub(r"\s+", "", unlatex(text).lower().replace("\u2009", ""))


def math_read(text: str) -> str:
    r"""``normalise`` of the text as a reader sees its LaTeX, sub- and
    superscripts flattened: an answer writes "W2-convergence" where the
    abstract typesets ``$\mathcal{W}_2$-convergence``."""
    return normalise(clean_latex(text)).replace("_", "").replace("^", "")


def specifics(text: str) -> set[str]:
    """Numbers and name-like tokens a claim asserts (single digits are not claims)."""
    found = {m.group(0).strip().rstrip(".,").replace(" ", "") for m in NUMBER.finditer(text)}
    found |= {m.group(0) for m in NAME.finditer(text)}
    return {s for s in found if len(s) > 1 or not s.isdigit()}


_SCALE = {"k": 1e3, "m": 1e6, "b": 1e9}
_VALUE = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)\s?([kKmMbB]|thousand|million|billion)?(?![\w])")


def values(text: str) -> set[float]:
    """The numbers a text states, as values: "3K", "3,000" and "3 thousand" are one value."""
    out: set[float] = set()
    for m in _VALUE.finditer(unlatex(text)):
        v = float(m.group(1).replace(",", ""))
        unit = (m.group(2) or "").lower()
        out.add(round(v * _SCALE.get(unit[:1], 1.0), 6))
    return out


# A formula states a value as surely as digits do: a bound or rate written in
# math ("$\tilde{O}(\sqrt{eH^5N})$", "O(1/T)"). An inline span counts when it has
# structure (a bracket, power, root or fraction); a lone symbol ("$N$") or a
# subscripted name ("$\mathcal{W}_2$") does not.
_MATH_SPAN = re.compile(r"\$([^$]{2,200})\$")
_FORMULA_MARK = re.compile(r"[()^]|\\sqrt|\\frac|\\log")
_BIG_O = re.compile(r"(?<![\w\\])[O\u0398\u03a9]\([^()]{1,60}\)")


def formulas(text: str) -> set[str]:
    """The formulas a text states, whitespace-free, as written."""
    found = {m.group(1) for m in _MATH_SPAN.finditer(text) if _FORMULA_MARK.search(m.group(1))}
    found |= {m.group(0) for m in _BIG_O.finditer(_MATH_SPAN.sub(" ", text))}
    return {re.sub(r"\s+", "", f) for f in found}


# A web address as abstracts give one: "https://github.com/…", "\url{…}",
# "www.…", "papercopilot.com". arXiv's placeholder "this https URL" is none.
_LINK = re.compile(r"https?://[^\s}]+|\bwww\.[^\s}]+|\b[\w-]+\.(?:com|org|io|net|ai|edu|dev)\b",
                   re.IGNORECASE)


def has_link(text: str) -> bool:
    """Whether a text gives a web address."""
    return bool(_LINK.search(text))


def has_value(text: str) -> bool:
    """Whether a text states a number (digits, a number word or a formula)."""
    return bool(NUMBER.search(unlatex(text)) or _NUMBER_WORD.search(text) or formulas(text))


# Number words ("one" is left out: "one of the…" states no value). Teens and
# tens, multiples ("doubles", "threefold", "an order of magnitude") and
# fractions ("by a third", "a quarter of") state a quantity as surely as digits do.
_CARDINAL = (r"two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
             r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|"
             r"hundreds?|thousands?|millions?|billions?|dozens?")
_NUMBER_WORD = re.compile(
    rf"\b(?:{_CARDINAL}|half|halve[sd]?|halving|twice|doubl(?:e[sd]?|ing)|tripl(?:e[sd]?|ing)|"
    r"quadrupl(?:e[sd]?|ing)|(?:two|three|four|five|six|seven|eight|nine|ten|twenty|fifty|hundred|thousand)"
    r"-?fold|orders? of magnitude|by (?:a|one|two)[ -](?:third|quarter)s?|"
    r"(?:a|one|two)[ -](?:third|quarter|fifth|tenth)s? of)\b",
    re.IGNORECASE,
)


def number_words(text: str) -> set[str]:
    """The number words a text uses ("two", "twice"), lower-cased."""
    return {m.group(0).lower() for m in _NUMBER_WORD.finditer(text)}


# A count: digits ("1,128", "8", "200K") or a number word, as its own token.
_COUNT = re.compile(rf"^(?:\d[\d,.]*[kKmMbB]?|one|{_CARDINAL})$", re.IGNORECASE)
COUNT_WINDOW = 3  # words a count may stand before what it counts ("four specific policy recommendations")


def states_count(text: str, counted: set[str]) -> bool:
    """Whether ``text`` states a count of a thing whose stemmed words are
    ``counted``: a number followed, within ``COUNT_WINDOW`` words, by one of
    them ("1,128 testing tasks", "seven API providers", "four recommendations")."""
    if not counted:
        return False
    toks = re.findall(r"[\w.,-]+", unlatex(text))
    stem = stemmer()
    for i, t in enumerate(toks):
        if _COUNT.match(t.strip(".,")):
            if any(stem.terms(u) & counted for u in toks[i + 1 : i + 1 + COUNT_WINDOW]):
                return True
    return False


class Stemmer:
    """Stemmed content terms of a text (PyStemmer's English Snowball)."""

    def __init__(self) -> None:
        import Stemmer as _pystemmer

        self._s = _pystemmer.Stemmer("english")

    def terms(self, text: str) -> set[str]:
        words = [w.lower() for w in WORD.findall(unlatex(text))]
        # Numbers are content however short ("3K", "7"); other short words are not.
        keep = [w for w in words if w not in STOP and (len(w) > 2 or w[0].isdigit())]
        return set(self._s.stemWords(keep))


@lru_cache(maxsize=1)
def stemmer() -> Stemmer:
    return Stemmer()


def short_title(title: str, limit: int = 60) -> str:
    """A title shortened to ``limit`` characters: the part before a colon when
    it fits ("MELON" of "MELON: Provable Defense …"), else the title, cut at a
    word with "…" when too long. A title's short form, not a paper's name: that
    is ``Paper.name`` (``rag.labels.paper_name``), which also reads the abstract."""
    head = title.split(":", 1)[0].strip()
    if head and len(head) <= limit:
        return head
    return title if len(title) <= limit else title[: limit - 1].rsplit(" ", 1)[0] + "…"


# A run of markers used as a noun ("According to [1]", "[2] proposes…") names
# papers rather than citing a claim.
_CHAIN = re.compile(r"\[\d+\](?:\s*(?:,|and|or|&)?\s*\[\d+\])*")
_NOUN_BEFORE = re.compile(
    r"(?:\b(?:according to|in|by|from|is|are|was|see|excerpts?|papers?|abstracts?|studies)\s*|^\s*)$",
    re.IGNORECASE,
)
_LEAD_NOUN = re.compile(r"\b(?:the )?(?:excerpts?|papers?|abstracts?)\s+(?=(?-i:[A-Z]))", re.IGNORECASE)


def name_markers(raw: str, titles: list[str]) -> str:
    """Replace marker runs used as nouns with "Title [n]" (``titles[n-1]``) so
    the sentence says which paper it means; the marker stays as its citation."""

    def titled(m: re.Match) -> str:
        return re.sub(
            r"\[(\d+)\]",
            lambda x: f"{titles[int(x.group(1)) - 1]} [{x.group(1)}]"
            if 1 <= int(x.group(1)) <= len(titles) else x.group(0),
            m.group(0),
        )

    out: list[str] = []
    for sent in split_sentences(raw):
        pieces, last = [], 0
        for m in _CHAIN.finditer(sent):
            after = sent[m.end():].strip()
            leading_cite = not sent[: m.start()].strip() and after[:1].isupper()
            noun = _NOUN_BEFORE.search(sent[: m.start()]) and after not in ("", ".") and not leading_cite
            noun = noun or bool(re.search(r"\b(?:is|are|was|to|in)\s*$", sent[: m.start()], re.I))
            pieces += [sent[last : m.start()], titled(m) if noun else m.group(0)]
            last = m.end()
        pieces.append(sent[last:])
        out.append(_LEAD_NOUN.sub("", "".join(pieces)))
    return " ".join(out)
