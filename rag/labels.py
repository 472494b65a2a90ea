"""Title labels for papers that arrive without a title (seed files, bare records).

Owns ``derive_label`` / ``label_candidates``: a short, human-meaningful handle
derived from the abstract alone, deterministic and model-free. The preferred
label is the name of the system/method the paper introduces ("ShieldAgent",
"NS-DPO", "Angle Domain Guidance (ADG)"); otherwise a short phrase (<= 8 words)
from the contribution clause ("we propose / study / show that ..."); otherwise
from the first sentence. ``label_candidates`` returns alternatives in order of
preference so the corpus loader can keep labels distinct across papers.

Sentences are ``rag.text.split_sentences``'s and LaTeX is read by
``rag.text.clean_latex``, as everywhere else. ``paper_name`` is the one rule
for what running text calls a paper (``Paper.name`` calls it).

The word lists (contribution verbs, filler and generic words, common
acronyms, phrase boundaries) are data in ``rag/label_words.json``, loaded
once at import; the rules that use them are here.
"""

from __future__ import annotations

import html
import json
import re
from functools import lru_cache
from importlib.resources import files

from rag.text import clean_latex, split_sentences

MAX_WORDS = 8
_ACRONYM_INLINE_CHARS = 40  # "Phrase (ACR)" up to this length, else just "ACR"

_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")
_MD_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")


def _load_words() -> dict:
    return json.loads(files("rag").joinpath("label_words.json").read_text(encoding="utf-8"))


_W = _load_words()  # the word lists are data: rag/label_words.json
WORDS = _W  # shared with rag.answer.reading (its "question_frame" lists)
_VERBS_NAME = "|".join(_W["contribution_verbs"]["name"])
_VERBS_FIRST = "|".join(_W["contribution_verbs"]["first"])
_VERBS_TOPIC = "|".join(_W["contribution_verbs"]["topic"])
_ADVERBS = rf"(?:{'|'.join(_W['contribution_adverbs'])})"
# "we [adverbs] VERB" or "this paper/work VERBs"; group 1 = verb, tail follows the match.
_CONTRIB = re.compile(
    rf"\b(?:we\s+(?:{_ADVERBS}\s+){{0,4}}|(?:this|our)\s+(?:paper|work|study)\s+|and\s+)"
    rf"({_VERBS_NAME}|{_VERBS_TOPIC})(?:s|d|ed)?\b(?:\s+and\s+[a-z]+(?=\s))?",
    re.IGNORECASE,
)
_CALLED = re.compile(
    rf"\b(task\s+)?(?:{'|'.join(_W['naming_verbs'])}|(?:we|which we)\s+"
    rf"(?:{'|'.join(_W['naming_we_verbs'])}))\s+(?:as\s+)?",
    re.IGNORECASE,
)
_OUR = re.compile(r"\b[Oo]ur\s+(?:(?:novel|new|proposed)\s+)?")

_TOKEN = r"[A-Za-z0-9][\w\-+.]*[\w+]|[A-Za-z0-9]"
_SMALL = frozenset(_W["small_words"])
_LEADING_FILLER = frozenset(_W["leading_filler"])
_TRAILING_STOP = _SMALL | frozenset(_W["trailing_stop_extra"])
_PREPS = frozenset(_W["prepositions"])
_DEMONSTRATIVE = frozenset(_W["demonstratives"])
_GENERIC = frozenset(_W["generic"])
COMMON_ACRONYMS = frozenset(_W["common_acronyms"])
_NAME_SUFFIX_BLOCK = re.compile(
    rf"-(?:{'|'.join(_W['name_suffixes_not_names'])})$",
    re.IGNORECASE,
)
_BOUNDARY = re.compile(
    r"\s*(?:[,;:.!?\[]|---|--|\u2014|\u2013|\s-\s)\s*|"
    rf"\s+(?:{'|'.join(_W['phrase_boundary_words'])})\b|"
    rf"\s+and\s+(?:we\s+)?(?:{'|'.join(_W['phrase_boundary_and_verbs'])})\b",
    re.IGNORECASE,
)
_HEAD_NOUNS = tuple(_W["head_nouns"])
_LY_KEEP = frozenset(_W["ly_keep"])
_DROPPED = frozenset(_W["dropped_words"])
_TOPIC_PREFIXES = tuple(_W["topic_prefixes"])
_GENERIC_HEAD_PREPS = frozenset(_W["generic_head_prepositions"])
_AUX_SPLIT = re.compile(rf"\s+(?:{'|'.join(_W['auxiliaries'])})\s+")
_OPENING = re.compile(rf"^(?:{'|'.join(_W['opening_subordinators'])})\b[^,]{{0,80}},\s*")


def _prep(text: str) -> str:
    """Plain text for label extraction: no HTML or markdown emphasis/links,
    LaTeX read as ``rag.text.clean_latex`` reads it."""
    t = html.unescape(_TAG.sub(" ", text))
    t = _MD_LINK.sub(r"\1", t)
    t = t.replace("**", "").replace("__", "").replace("`", "")
    t = re.sub(r"(?<![\w*])\*(?=\S)|(?<=\S)\*(?![\w*])", "", t)  # *emphasis*
    t = clean_latex(t)
    t = t.replace("\u201c", '"').replace("\u201d", '"').replace("\u2019", "'")
    return re.sub(r"\s+", " ", t).strip()


def _appears(word: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def _strong_name(tok: str, prior: str) -> bool:
    """CamelCase, ALLCAPS, digits or hyphenated capitals, and new in the abstract."""
    if len(tok) < 2 or tok.lower() in COMMON_ACRONYMS or _NAME_SUFFIX_BLOCK.search(tok):
        return False
    if tok.lower().rstrip("s") in COMMON_ACRONYMS:
        return False
    shaped = re.search(r"[a-z][A-Z]|[A-Z]{2}", tok) is not None or (
        re.search(r"\d", tok) is not None
        and re.search(r"[A-Za-z]", tok) is not None
        and tok[0].isupper()
    )
    return shaped and not _appears(tok, prior)


def _weak_name(tok: str, prior: str) -> bool:
    """A capitalised word right after "we present": "Packrat", "Cape"."""
    return (
        tok[:1].isupper()
        and tok.lower() not in _SMALL | _LEADING_FILLER | _DEMONSTRATIVE
        and tok.lower() not in COMMON_ACRONYMS
        and not _appears(tok, prior)
    )


def _acronym_label(phrase: str, acr: str) -> str:
    phrase = phrase.strip()
    full = f"{phrase[:1].upper()}{phrase[1:]} ({acr})"
    return full if len(full) <= _ACRONYM_INLINE_CHARS else acr


def _skip_filler(tail: str) -> str:
    words = tail.split(" ")
    while words and words[0].lower() in _LEADING_FILLER:
        words.pop(0)
    return " ".join(words)


_PHRASE_ACR = re.compile(r"((?:[\w\-']+\s+){0,5}[\w\-']+)\s*\(([^()\s]{2,20})\)")
_TITLE_WORD = r"[A-Z][\w\-']*"
_TITLE_PHRASE = re.compile(
    rf"({_TITLE_WORD}(?:\s+(?:{_TITLE_WORD}|of|for|and|with|then|via|to|on|in))*)"
)


def _name_from_object(tail: str, prior: str, *, any_phrase_acr: bool) -> str | None:
    """The name introduced at the start of a contribution clause's object, if any."""
    obj = _skip_filler(tail.strip())
    if not obj:
        return None
    # 1. a name token directly: "ShieldAgent, the first ...", "MILS: ...", "MELON (..."
    m = re.match(rf"({_TOKEN})(?=\s*(?:[,:;(]|$)|\s+(?:which|that|is|as|for|to|in|with)\b)", obj)
    if m and (
        _strong_name(m.group(1), prior)
        or (_weak_name(m.group(1), prior) and re.match(r"\s*[,:(]", obj[m.end() :]))
    ):
        return m.group(1)
    m = re.match(rf"({_TOKEN})\s+({'|'.join(_HEAD_NOUNS)})\b", obj)
    if m and _strong_name(m.group(1), prior):  # "the ToT dataset"
        return f"{m.group(1)} {m.group(2)}"
    # 2. "Foo Bar (FB)" at the start of the object
    m = _PHRASE_ACR.match(obj)
    if m and not _CALLED.search(m.group(1)):  # "a task called X (Y)" is the caller's job
        phrase, acr = m.group(1), m.group(2)
        title_case = re.fullmatch(_TITLE_PHRASE, phrase) is not None
        if (
            (title_case or any_phrase_acr)
            and not _appears(acr, prior)
            and (_strong_name(acr, prior) or acr.isupper())
        ):
            return _acronym_label(phrase, acr)
    # 3. a strong name token within the first words, ending an apposition: "..., LEMoN, a method"
    for m in re.finditer(rf"(?<![(\w-])({_TOKEN})(?=\s*[,:(]|\s*$)", " ".join(obj.split()[:10])):
        if _strong_name(m.group(1), prior):
            return m.group(1)
    # 4. a Title Case phrase used as a name: "Supervised Feature Generation framework"
    m = re.match(rf"{_TITLE_PHRASE.pattern}(?=\s+[a-z]|\s*$)", obj)
    if m:
        phrase = m.group(1)
        caps = [w for w in phrase.split() if w[:1].isupper()]
        if (
            len(caps) >= 2
            and len(phrase.split()) <= 6
            and not _appears(phrase.lower(), prior.lower())
        ):
            return phrase
    return None


def _named_candidates(sents: list[str]) -> list[str]:
    names: list[str] = []
    late: list[str] = []  # "a new task called X" is not the paper's system
    for i, sent in enumerate(sents):
        prior = " ".join(sents[:i])
        found: list[tuple[int, str, bool]] = []
        for m in _CALLED.finditer(sent):
            tail = sent[m.end() :]
            qm = re.match(r'"([^"]{3,60})"\s*\(([^()\s]{2,20})\)', tail)
            name = (
                _acronym_label(qm.group(1), qm.group(2))
                if qm
                else _name_from_object(tail, prior + " " + sent[: m.start()], any_phrase_acr=True)
            )
            if name:
                found.append((m.start(), name, bool(m.group(1))))
        for m in _CONTRIB.finditer(sent):
            if not re.fullmatch(_VERBS_NAME, m.group(1).lower()):
                continue
            name = _name_from_object(
                sent[m.end() :], prior + " " + sent[: m.start()], any_phrase_acr=True
            )
            if name:
                found.append((m.start(), name, False))
        for m in _OUR.finditer(sent):
            pm = re.match(rf"{_TITLE_PHRASE.pattern}\s*\(([^()\s]{{2,20}})\)", sent[m.end() :])
            if pm and not _appears(pm.group(2), prior + " " + sent[: m.start()]):
                found.append((m.start(), _acronym_label(pm.group(1), pm.group(2)), False))
        for _, name, is_task in sorted(found, key=lambda f: f[0]):
            (late if is_task else names).append(name)
    return names + late


def _substitute_acronyms(text: str) -> str:
    """ "the Conditional Average Treatment Effect (CATT)" -> "the CATT"; drop other (...)."""

    def repl(m: re.Match[str]) -> str:
        acr = m.group(2)
        words = m.group(1).split(" ")
        keep = len(words)
        while keep > 0 and (words[keep - 1][:1].isupper() or words[keep - 1] in _SMALL):
            keep -= 1
        while keep < len(words) and words[keep] in _SMALL:
            keep += 1
        if keep < len(words) and re.search(r"[A-Z]", acr):
            return " ".join(words[:keep] + [acr])
        return m.group(1)

    # anchored at the start or after ")" so a paren-free text is scanned once, not n^2
    text = re.sub(r"(?:^|(?<=\)))([^()]*?)\s*\(([^()\s]{2,15})\)", repl, text)
    return re.sub(r"\s*\([^()]*\)", "", text)


def _phrase(tail: str, *, clause: bool = False) -> str | None:
    """A short topic phrase from the start of ``tail`` (the object of a contribution verb)."""
    full = _substitute_acronyms(" ".join(tail.split()[:60]))  # a label needs only the start
    t = _BOUNDARY.split(full, maxsplit=1)[0]
    if len(t.split()) <= 2 and re.match(r"\s+(?:that|which)\b", full[len(t) :]):
        # "a scanner that flags X": one noun says little, keep its relative clause
        t = re.split(r"[,;:.!?]", full, maxsplit=1)[0]
    if clause:  # "that X can be ..." -> subject + verb phrase up to an auxiliary
        t = _AUX_SPLIT.split(t)[0]
    words = [
        w
        for w in t.split()
        if not (w.lower().endswith("ly") and len(w) >= 6 and w.lower() not in _LY_KEEP)
    ]
    words = [w for w in words if w.lower() not in _DROPPED]
    while words and words[0].lower() in _LEADING_FILLER:
        words.pop(0)
    low = " ".join(words).lower()
    for prefix in _TOPIC_PREFIXES:
        if low.startswith(prefix):
            words = words[len(prefix.split()) :]
            low = low[len(prefix) :]
    while words and words[0].lower() in _LEADING_FILLER:
        words.pop(0)
    if len(words) > MAX_WORDS:  # "comprehensive empirical study on how X" -> "how X"
        head = next((i for i, w in enumerate(words) if w.lower() not in _GENERIC), 0)
        if head and words[head].lower() in _GENERIC_HEAD_PREPS and len(words) - head > 3:
            words = words[head + 1 :]
    if len(words) > MAX_WORDS:
        words = words[:MAX_WORDS]
        cut = max((i for i in range(3, MAX_WORDS) if words[i].lower() in _PREPS), default=None)
        if cut:
            words = words[:cut]
    while words and words[-1].lower() in _TRAILING_STOP:
        words.pop()
    if not words or any(w.lower() in _DEMONSTRATIVE for w in words):
        return None
    if all(w.lower() in _GENERIC for w in words):
        return None
    if len(words) >= 2 and words[-2].lower() == "the" and words[-1].lower() in _GENERIC:
        return None  # "version of the algorithm": refers back, says nothing

    return " ".join(words)


def _topic_candidates(sents: list[str]) -> list[str]:
    """Contribution phrases: "we propose X" before "we study X" before "we show that X"."""
    found: list[tuple[int, int, int, str]] = []
    for i, sent in enumerate(sents):
        main_rank: int | None = None
        for m in _CONTRIB.finditer(sent):
            verb = m.group(1).lower()
            rank = own = (
                0 if re.fullmatch(_VERBS_FIRST, verb) else 2 if verb.endswith("that") else 1
            )
            if m.group(0).lower().startswith("and"):
                # "we study X and propose Y": Y ranks no higher than the sentence's main verb
                if main_rank is None:
                    continue
                rank = max(rank, main_rank)
            else:
                main_rank = rank
            phrase = _phrase(sent[m.end() :], clause=verb.endswith("that"))
            if phrase:
                found.append((rank, i, own, phrase))
    return [f[3] for f in sorted(found, key=lambda f: f[:3])]


def _first_sentence_phrase(sents: list[str]) -> str | None:
    if not sents:
        return None
    s = _OPENING.sub("", sents[0])
    return _phrase(s, clause=True)


def _tidy(label: str) -> str:
    label = label.strip(" ,;:.-\"'")
    if label[:1].islower() and not re.match(r"[a-z]+[A-Z0-9]", label):  # keep "k-means", "iPhone"
        label = label[:1].upper() + label[1:]
    return label


def label_candidates(abstract: str) -> list[str]:
    """Label candidates for ``abstract``, best first, distinct (case-insensitive), non-empty."""
    return list(_label_candidates(abstract))


@lru_cache(maxsize=65536)  # asked twice per paper (derive, then de-duplicate labels)
def _label_candidates(abstract: str) -> tuple[str, ...]:
    text = _prep(abstract)
    sents = split_sentences(text)
    raw = _named_candidates(sents) + _topic_candidates(sents)
    raw.append(_first_sentence_phrase(sents) or "")
    raw.append(" ".join(text.split()[:MAX_WORDS]) or "Untitled abstract")
    seen: set[str] = set()
    out: list[str] = []
    for cand in raw:
        label = _tidy(cand or "")
        if label and label.lower() not in seen:
            seen.add(label.lower())
            out.append(label)
    return tuple(out)


def derive_label(abstract: str) -> str:
    """The best label for an untitled paper (see module docstring)."""
    return label_candidates(abstract)[0]


@lru_cache(maxsize=65536)  # Paper.name asks it ~30 times an answer (profiled: 12% of its CPU)
def system_name(abstract: str) -> str | None:
    """The name an abstract gives its own method or system ("We present
    Packrat, …" -> "Packrat"), or None."""
    names = _named_candidates(split_sentences(_prep(abstract)))
    return _tidy(names[0]) or None if names else None


def paper_name(title: str, abstract: str, limit: int = 40) -> str:
    """What running text calls a paper: the name before a title's colon
    ("MELON"), else the one-word name its abstract gives its system
    ("Packrat" for "Auto-reconfiguration for … DNN Serving"), else the title."""
    head = title.split(":", 1)[0].strip()
    if ":" in title and head and len(head) <= limit:
        return head
    name = system_name(abstract)
    if name and " " not in name and len(name) <= 24 and name.lower() not in title.lower():
        return name
    return title
