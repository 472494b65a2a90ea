"""Reading questions and sentences: what a question asks for, which papers
it names, and which names a sentence states.

Predicates, not rules: nothing here fires or goes into an answer's trace.
The rules in ``rag.answer.rules`` and the ``rag.answer.pipeline.Answerer`` read questions and
evidence through them: a question asks for a value (``asks_value``,
``asked_measure``, ``value_clauses``), a name (``asks_name``), a gist
(``asks_overview``) or a comparison (``is_comparative``, ``compares_papers``);
``named_papers`` finds the retrieved papers it names (``is_generic``: a
field's term names none); ``frame_verbs`` finds the verbs of its frame
("target" in "which bottleneck does each target"); ``names_in`` and
``local_abbreviations`` read the names a sentence states.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rag.config_sections import EvidenceSettings
from rag.labels import WORDS, system_name
from rag.text import NAME, STOP, specifics, stemmer
from rag.types import Paper, SearchHit

# "how many…", "by how much…", "what is the accuracy/number/size…" ask for a
# value when they open the question or one of its clauses ("a measure of how
# much X helps" inside a "what measure…" question asks for no value). The
# measure word must end its noun phrase: "what learning rate schedule", "what
# score function", "what cost model" ask for a method, not a value; a symbol
# (spelt-out Greek letter or single letter) or a unit may follow ("what privacy
# budget epsilon", "what accuracy margin").
_SYMBOL = r"[a-zA-Z]|alpha|beta|gamma|delta|epsilon|eta|kappa|lambda|mu|rho|sigma|tau"  # "budget epsilon", "rate η"

_MEASURE_ENDS = (r"(?=\s*(?:[?,.;:]|$)|\s+(?:does|do|did|is|are|was|were|has|have|had|can|could|would|"
                 r"will|of|on|for|in|at|over|against|versus|vs|compared|relative|when|with|from|to|by|"
                 r"between|per|across|under|after|before|than|that|it|they|reached|achieved|obtained|"
                 r"reported|factor|margin|gap|points?|" + _SYMBOL + r")\b|\s*\()")

_VALUE_Q = re.compile(
    r"(?:^|[,;:]\s*|\band\s+|\bor\s+)(?:(?:by|across|in|on|for|with|at|over|to|from|of)\s+)?(?:"
    r"how (?:many|much|long|large|big|fast|often|far)\b|"
    r"what (?:is |was |are |were )?(?:the |its |their )?(?:[\w-]+ ){0,3}?(?:number|percentage|rate|"
    r"ratio|size|accuracy|score|value|amount|count|speed-?up|improvement|reduction|gain|budget|"
    r"cost|fraction|proportion|bound|complexit(?:y|ie))s?" + _MEASURE_ENDS + ")",
    re.IGNORECASE,
)

# A name used by more papers than this is a field's term (LLM), not a paper's name
# (setting AQA_GENERIC_NAME_PAPERS; this is its default, for callers without settings).
GENERIC_NAME_PAPERS: int = EvidenceSettings.model_fields["generic_name_papers"].default


def is_generic(name: str, corpus: Sequence[str], limit: int = GENERIC_NAME_PAPERS) -> bool:
    """A name used by more than ``limit`` indexed papers (LLM, GPU, API)."""
    pat = re.compile(rf"(?<![\w-]){re.escape(name)}s?(?![\w-])")
    n = 0
    for t in corpus:
        if pat.search(t):
            n += 1
            if n > limit:
                return True
    return False


# "Summarize this paper", "what problem does it address", "what do these two
# have in common": any abstract answers these, so no check may decline them.
_OVERVIEW = re.compile(
    r"\b(?:summar(?:y|i[sz]e)|overview|tl;?dr|gist|in a nutshell|in common|"
    r"(?:main|key|central|core|overall) (?:idea|contribution|point|finding|result|goal|claim|"
    r"takeaway|message|insight)s?|contributions?|"
    r"what (?:problem|question|challenge|gap|issue)s? (?:does|do|did|is|are)|"
    r"what(?:'s| is| are)? (?:it|this|this paper|this work|these(?: two)?(?: papers)?|they|the paper) "
    r"about|"
    r"what (?:does|do|did) (?:it|this|this paper|this work|they|the paper|the authors|these(?: two)?"
    r"(?: papers)?) (?:propose|introduce|present|do|study|investigate|address|tackle|contribute|"
    r"offer|show|find)|"
    r"what(?:'s| is) (?:new|novel)|novelty|motivation)\b|"
    # A bare request for more ("Tell me more", "Elaborate"), not "tell me more about the GPUs".
    r"\b(?:tell me more(?: about (?:it|this|that|them|th(?:is|e) (?:paper|work)|these papers))?|"
    r"more details?|elaborate|go on|explain (?:it|this|that)(?: (?:more|further))?)(?=\s*(?:\(|[?.!]|$))",
    re.IGNORECASE)


def asks_overview(question: str) -> bool:
    """The question asks for a paper's gist (summary, problem, contribution), not a detail."""
    return bool(_OVERVIEW.search(question))


_HOW_MANY = re.compile(r"\bhow many\s+([\w/-]+)(?:\s+([\w/-]+))?", re.IGNORECASE)


def asked_measure(question: str) -> set[str]:
    """Stemmed words of what "how many X" counts (the next one or two words)."""
    m = _HOW_MANY.search(question)
    if not m:
        return set()
    return stemmer().terms(" ".join(w for w in m.groups() if w).replace("/", " "))


# "What FID does X achieve", "what VQAScore did they reach": a measure reached
# is a value, whatever the measure is called.
_VALUE_REACHED = re.compile(
    r"\bwhat\s+(?:[\w@.-]+\s+){1,4}?(?:does|do|did|can)\s+(?:[\w@.,-]+\s+){1,8}?"
    r"(?:achieve|reach|attain|obtain)\b", re.IGNORECASE)


# "At what URL…", "where is the code hosted", "link to the data": the answer is
# a web address, which a sentence states or not, like a value.
_LINK_Q = re.compile(
    r"\b(?:what|which)\s+(?:is\s+the\s+|are\s+the\s+)?(?:[\w-]+\s+){0,2}?(?:url|urls|web address|"
    r"link)\b(?!\s+prediction)|"
    r"\b(?:url|link)\s+(?:to|for|of)\s+(?:the\s+|its\s+|their\s+)?(?:code|data|dataset|model|weights|"
    r"project|repository)\b|"
    # Asked, not relative: "where is the code hosted", not "settings where data is scarce".
    r"(?:^|[,;:]\s*|\band\s+)where\s+(?:is|are|can|could|do|does|will|was|were)\b(?:\s+[\w-]+){0,6}?"
    r"\s+(?:code|data|dataset|model|weights|implementation|checkpoints?|benchmark|project page)s?\b"
    r"(?:\s+[\w-]+){0,3}?\s+(?:hosted|available|released|found|downloaded|published|located|shared)\b",
    re.IGNORECASE)


def asks_link(question: str) -> bool:
    """The question asks for a web address (code, data, a project page)."""
    return bool(_LINK_Q.search(question))


def asks_value(question: str) -> bool:
    return bool(_VALUE_Q.search(question) or _VALUE_REACHED.search(question))


# The clause asking for a value runs to the next clause break ("…, and how
# much does it beat prior methods?" asks about beating prior methods).
_CLAUSE_END = re.compile(r"[,;?]|\b(?:and|or|while|whereas)\b", re.IGNORECASE)

_HOW_WORDS = frozenset({"much", "mani", "larg", "big", "fast", "often", "far", "long"})


def value_clauses(question: str) -> list[set[str]]:
    """Per clause that asks for a value, its stemmed content words without the
    asking words ("how much"): what a sentence stating that value shares."""
    found = sorted([*_VALUE_Q.finditer(question), *_VALUE_REACHED.finditer(question)],
                   key=lambda m: m.start())
    out, last = [], -1
    for m in found:
        if m.start() < last:
            continue  # one clause matched by both patterns
        rest = question[m.end():]
        end = _CLAUSE_END.search(rest)
        last = m.end() + (end.start() if end else len(rest))
        out.append(stemmer().terms(question[m.start():last]) - _HOW_WORDS)
    return out


# "Which datasets…", "what base model does it fine-tune", "on which benchmark":
# the asked thing is an artifact whose members go by proper names (COCO,
# AgentDojo, Llama-3, MuJoCo). "Which paper…", "what kind of model" ask for no name,
# nor does "what dataset sizes" (a value).
_ASKS_NAME = re.compile(
    r"\b(?:which|what)\s+(?:(?!(?:of|kinds?|sorts?|types?|papers?|works?|stud(?:y|ies)|is|are|was|were|"
    r"the|does|do|did|can|has|have)\b)[\w-]+\s+){0,3}?"
    r"(datasets?|benchmarks?|backbones?|(?:base|pre-?trained|language|foundation)\s+models?|LLMs?|"
    r"environments?|suites?|simulators?|GPUs?)\b"
    # "What dataset sizes", "which benchmark scores": a measure of the artifact, a value.
    r"(?!\s+(?:sizes?|scales?|numbers?|counts?|accurac(?:y|ies)|scores?|results?|performance)\b)"
    # "Which model serves as…", "which captioning model": a model by its name, unless
    # "which" opens a clause ("in which a model…", "which picks how many model…").
    r"|\b(?:which|what)\s+(?:(?!(?:a|an|the|of|how|many|kinds?|sorts?|types?|its|their|this|that|papers?|works?|"
    r"is|are|was|were|does|do|did|can|has|have)\b)[\w-]+\s+){0,2}?models?(?![\w-])"
    r"(?!\s+(?:sizes?|scales?|architectures?|famil(?:y|ies)|classes?|copies)\b)",
    re.IGNORECASE)

# A capitalised word inside a sentence (not its first word) is a proper name.
_PROPER = re.compile(r"(?<=[a-z0-9,;:()]\s)[A-Z][a-z]+(?:[-.][A-Za-z0-9]+)*\b")


def asks_name(question: str) -> bool:
    """The question asks which dataset, benchmark, backbone, base model or environment."""
    return bool(_ASKS_NAME.search(question))


# "How does each target …", "do they protect", "X and Y each relate to": the
# verb whose subject is a pronoun is the question's frame. A synthesis
# answering it uses that verb for what a paper does ("MELON targets indirect
# injections"): it is how the question asks, not a claim term the paper must state.
_TOKEN = re.compile(r"[A-Za-z][\w-]*|[?.,;:()]")
_FRAME = WORDS["question_frame"]  # the word lists are data: rag/label_words.json
_ASKING = frozenset(_FRAME["asking"])
_PRONOUN_SUBJECTS = frozenset(_FRAME["pronoun_subjects"])  # always a subject after an asking word
_QUANTIFIER_SUBJECTS = frozenset(_FRAME["quantifier_subjects"])  # a subject or a determiner
_SKIP = frozenset(_FRAME["skip"])  # and adverbs in -ly
_AFTER_VERB = frozenset(_FRAME["after_verb"])  # an object, a preposition, a wh-word, a clause end
_PREPOSITIONS = frozenset(_FRAME["prepositions"])
_NOT_FRAME = frozenset(_FRAME["not_frame"])


def frame_verbs(question: str) -> set[str]:
    """The verbs of a question's frame: the verb of a pronoun subject
    ("protect" in "the way they protect"), or of "each"/"both" used as a
    subject ("target" in "which bottleneck does each target,", "relate" in
    "X and Y each relate to"; after "each attack" the next word). A word
    that may be a noun is kept out unless an object, a preposition or the
    clause's end follows it; "differ", "compare" and auxiliaries are never
    frame verbs (they are read elsewhere or carry no claim)."""
    toks = [t.lower() for t in _TOKEN.findall(question)]
    out: set[str] = set()

    def word_at(k: int) -> bool:
        return k < len(toks) and toks[k].isalpha() and toks[k] not in _NOT_FRAME

    def verb_at(k: int) -> bool:
        return word_at(k) and (k + 1 == len(toks) or toks[k + 1] in _AFTER_VERB)

    for i, t in enumerate(toks):
        prev = toks[i - 1] if i else ""
        k = i + 1  # the first word after the subject that is no adverb
        while k < len(toks) and (toks[k] in _SKIP or toks[k].endswith("ly")):
            k += 1
        if t in _PRONOUN_SUBJECTS and prev in _ASKING:
            if word_at(k):
                out.add(toks[k])
        elif t in _QUANTIFIER_SUBJECTS and prev not in _PREPOSITIONS:
            if verb_at(k):
                out.add(toks[k])
            elif prev in _ASKING and verb_at(k + 1) and toks[k].isalpha():  # "does each attack target,"
                out.add(toks[k + 1])
    return out


# "Refine via Intrinsic Self-Verification (ReVISE)", "Large Language Models
# (LLMs)": capitalised words spelling out the acronym that follows them.
_EXPANSION = re.compile(
    r"((?:[A-Z][\w-]*\s+(?:(?:via|of|for|and|the|to|in|on|with|a|an)\s+)?){1,8})"
    r"\((\w*[A-Z]\w*[A-Z][\w-]*)\)")


def names_in(text: str) -> set[str]:
    """Names a sentence states: name-like tokens and numbers with letters
    (GPT-4o, 405B) and capitalised words inside it (Llama, Mistral), except
    the words an acronym expands (the acronym itself still counts)."""
    found = {x for x in specifics(text) if any(ch.isalpha() for ch in x)}
    spelled = {w for m in _EXPANSION.finditer(text)
               if m.group(1)[0].upper() == m.group(2)[0].upper() for w in m.group(1).split()}
    spelled |= {w.strip(",.;:") for m in _EXPANDED.finditer(text) if _spells(m.group(1), m.group(2))
                for w in m.group(2).split()}
    return (found - spelled) | {m.group(0) for m in _PROPER.finditer(text) if m.group(0) not in spelled}


# "MELON (Masked re-Execution and TooL comparisON)": an acronym followed by
# the words it spells out, in parentheses.
_EXPANDED = re.compile(r"\b(\w*[A-Z]\w*[A-Z][\w-]*)\s*\(([^()]{3,120})\)")


_SPELLED_SHARE = 0.75  # ReVISE's E is no capital of "Refine via Intrinsic Self-Verification"


def _spells(acronym: str, words: str) -> bool:
    """Whether ``words`` spell ``acronym``: the same first letter, and most
    capitals of the acronym among the capitals of the words."""
    caps = [ch for ch in words if ch.isupper()]
    need = [ch for ch in acronym if ch.isupper()]
    found = sum(min(caps.count(ch), need.count(ch)) for ch in set(need))
    return words[:1].upper() == acronym[:1].upper() and found >= _SPELLED_SHARE * len(need)


# "the sequential learning (SL) stage": an acronym spelled out by the
# lowercase words just before it abbreviates a description; it names nothing.
_ABBREVIATED = re.compile(r"((?:[a-z][\w-]*\s+){1,6})\((\w*[A-Z][\w-]*)s?\)")


def local_abbreviations(text: str) -> set[str]:
    """Acronyms a text defines from lowercase words ("visual feedback (VF)")."""
    out = set()
    for m in _ABBREVIATED.finditer(text):
        letters = [ch for ch in m.group(2) if ch.isupper()]
        words = m.group(1).split()[-len(letters):] if letters else []
        if len(words) == len(letters) and all(w[0].upper() == ch for w, ch in zip(words, letters, strict=True)):
            out.add(m.group(2))
    return out


def own_names(paper: Paper) -> tuple[str, ...]:
    """The names a paper goes by: its title before a colon, its display name
    and the name its abstract gives its method (MELON, CoCoA-Mix, Speak Easy)."""
    head = paper.title.split(":", 1)[0] if ":" in paper.title else ""
    return tuple(n for n in (head, paper.name, system_name(paper.abstract) or "") if n)


def question_names(question: str, corpus: Sequence[str] = (),
                   limit: int = GENERIC_NAME_PAPERS) -> dict[str, re.Pattern[str]]:
    """Name-like tokens of the question (MELON, MeCo, NS-DPO) that are not a
    field's common term (found in more than ``limit`` texts of ``corpus``:
    LLM, GPU), each with the pattern that finds it as a whole name."""
    return {name: re.compile(rf"(?<![\w-]){re.escape(name)}s?(?![\w-])")
            for name in {m.group(0) for m in NAME.finditer(question)}
            if not (corpus and is_generic(name, corpus, limit))}


# A run of capitalised words ("Speak Easy", "Packrat", "Cache Me If You
# Must"): a paper's own name that is neither camel-case nor an acronym, which
# ``NAME`` misses. Up to this many words.
_CAPITAL_RUN = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]*)*\b")
PHRASE_WORDS = 6


def phrase_names(question: str) -> dict[str, re.Pattern[str]]:
    """Runs of capitalised words in the question and their sub-runs ("In
    Speak Easy" -> "Speak Easy"), none a stop word alone ("What"), each with
    the pattern that finds it as a whole name. Candidates only: a run names
    a paper when it is the whole of one of its own names (``own_names``)."""
    out: dict[str, re.Pattern[str]] = {}
    for m in _CAPITAL_RUN.finditer(question):
        words = re.split(r"(?<=\w)(?=[ -])", m.group(0))
        for i in range(len(words)):
            for j in range(i + 1, min(len(words), i + PHRASE_WORDS) + 1):
                name = "".join(words[i:j]).strip(" -")
                if name.lower() not in STOP and not NAME.fullmatch(name):
                    out[name] = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
    return out


def named_papers(question: str, hits: list[SearchHit], corpus: Sequence[str] = (),
                 limit: int = GENERIC_NAME_PAPERS) -> dict[str, list[int]]:
    """Names in the question that are the own name (``own_names``) of one or
    two retrieved papers: a name-like token found in one of them, or a run
    of capitalised words that is the whole of one ("the Speak Easy paper").
    name -> hit indices."""
    out: dict[str, list[int]] = {}
    names = {h_i: own_names(h.paper) for h_i, h in enumerate(hits)}
    for name, pat in question_names(question, corpus, limit).items():
        idx = [i for i, own in names.items() if any(pat.search(n) for n in own)]
        if 1 <= len(idx) <= 2:
            out[name] = idx
    runs = {n: p for n, p in phrase_names(question).items() if n not in out}
    for name, pat in runs.items():
        idx = [i for i, own in names.items() if any(pat.fullmatch(n) for n in own)]
        # The corpus test last: most runs ("How", "Bayesian") name no paper.
        if 1 <= len(idx) <= 2 and not (corpus and is_generic(name, corpus, limit)):
            out[name] = idx
    return longest_names(out)


def longest_names(found: dict[str, list]) -> dict[str, list]:
    """``found`` without a name inside a longer one that names the same
    papers ("Easy" beside "Speak Easy")."""
    return {n: v for n, v in found.items()
            if not any(n != m and n in m and v == found[m] for m in found)}


# A word inside a hyphenated name ("Difference-in-Differences") compares nothing.
_COMPARATIVE = re.compile(
    r"(?<![\w-])(?:compare[sd]?|comparison|contrast\w*|differ\w*|difference\w*|versus|vs\.?|both|"
    r"each of|the two|similarit\w*|in common)(?![\w-])", re.IGNORECASE)


def is_comparative(question: str) -> bool:
    return bool(_COMPARATIVE.search(question))


# "…compared with the baseline", "versus prior methods": a paper's own comparison.
_AGAINST_BASELINE = re.compile(
    r"\b(?:compared?d?|comparison|relative|versus|vs\.?|against|over|than)\s+(?:with\s+|to\s+)?"
    r"(?:the\s+|its\s+|their\s+)?(?:[\w-]+\s+)?(?:baselines?|prior|previous|existing|standard|"
    r"vanilla|state[- ]of[- ]the[- ]art|sota)\b", re.IGNORECASE)

# With one paper named, "both", "each of" and "the two" mostly mean two parts
# of it ("what are the two key components of DRAGO"): only these compare papers.
_COMPARES = re.compile(
    r"(?<![\w-])(?:compare[sd]?|comparison|contrast\w*|differ\w*|difference\w*|versus|vs\.?|"
    r"similarit\w*|in common)(?![\w-])", re.IGNORECASE)


# "FlexTok and the masked-diffusion token-ordering paper", "the ToT study and
# CoCoA-Mix": a second paper joined to the first by "and", described instead of
# named. "According to the RecFlow paper" joins nothing.
_AND_DESCRIBED_PAPER = re.compile(
    r"\band\s+the\s+(?:[\w-]+\s+){1,5}?(?:paper|study|work|article)\b"
    r"|\bthe\s+(?:[\w-]+\s+){1,5}?(?:paper|study|work|article)\s+and\b", re.IGNORECASE)


def compares_papers(question: str, one_named: bool = False) -> bool:
    """A comparison between papers, not a paper against its own baselines;
    with ``one_named`` (the question names one paper) only a comparison word,
    or a second paper described beside it ("X and the … paper"), counts."""
    text = _AGAINST_BASELINE.sub(" ", question)
    if one_named:
        return bool(_COMPARES.search(text) or _AND_DESCRIBED_PAPER.search(text))
    return is_comparative(text)


# "Which papers…", "what works…", "are there studies…", "list the papers that…":
# the answer is a set of papers, each cited for what it does.
# "These two papers" are chosen ones, not a set to find; "which paper studies"
# uses "studies" as a verb.
_ASKS_PAPERS = re.compile(
    r"\b(?:which|what|are there|is there|list|find|show|name|any)\b"
    r"(?:\s+(?!(?:these|those|the|two|both|papers?|works?|stud(?:y|ies))\b)[\w-]+){0,3}?\s+"
    r"(?:papers|works|studies|articles)\b"
    r"|\bwhich\s+of\s+(?:the|these|those)\s+(?:[\w-]+\s+)?(?:papers|works|studies|articles)\b"
    # "List the papers that…": an imperative asks for a set even with "the".
    r"|^\s*(?:list|find|show|name)\s+(?:me\s+)?(?:all\s+)?the\s+(?:papers|works|studies|articles)\b",
    re.IGNORECASE)


def asks_for_papers(question: str) -> bool:
    """The question asks which papers (plural) do something."""
    return bool(_ASKS_PAPERS.search(question))


# "Which paper…", "what study…", "is there a paper that…", "name the paper that…":
# the answer is one paper. "Which work" counts; "what work" mostly asks what has
# been done ("what work exists on…"), a set; "what is this paper…" is about a known one.
_ASKS_ONE_PAPER = re.compile(
    r"\bwhich\s+(?:[\w-]+\s+){0,2}?(?:paper|work|study|article|publication)\b(?!['’]s\b)"
    r"|\bwhat\s+(?:paper|study|article|publication)\b(?!['’]s\b)"
    r"|\b(?:is there|name|find|identify)\s+(?:a|the|one)\s+(?:[\w-]+\s+){0,2}?"
    r"(?:paper|work|study|article)\b(?!s)",
    re.IGNORECASE)
# "Which of the two…", "which paper, MeCo or Blockwise,…": a choice between known papers.
_ONE_OF_KNOWN = re.compile(
    r"\bwhich\s+(?:one\s+)?of\b|\bwhich\s+(?:paper|work|study)\s*[,:(]"
    r"|,\s*(?:the\s+)?[\w-]+(?:\s+[\w-]+)?\s+or\s+(?:the\s+)?[\w-]+(?:\s+[\w-]+)?\s*\?\s*$",
    re.IGNORECASE)


def asks_for_one_paper(question: str) -> bool:
    """The question asks which one paper does something ("Which paper
    proposes…?"), not a set of papers nor a choice between known ones."""
    return (bool(_ASKS_ONE_PAPER.search(question)) and not asks_for_papers(question)
            and not _ONE_OF_KNOWN.search(question))
