"""The answer decision: one calibrated model over every signal.

Before, about ten rules each declined an answer alone, each with its own
threshold; their false alarms added up on questions unlike the ones they were
written from. Now every one of them is a *signal* (a number in ``Signals``),
and one regularised logistic regression combines them into P(the question is
answered by the evidence). Its coefficients are data
(``rag/answer/decision.json``), fit on the tune split only by
``aqa eval fit-decision``; nothing here is hand-weighted.

Three outcomes, from two cut-offs in settings (``answer.decision_answer_at``
and ``answer.decision_decline_below``, chosen from the measured
risk-coverage curve that the fit prints and stores):

- ``answer``: the synthesis is written;
- ``not_confirmed``: the closest passages are shown, marked as not confirmed
  (counts as declined);
- ``decline``: the topic is absent, or the paper is there and its abstract
  does not state the asked detail.

Every answer's trace carries the decision: each signal's value and its
contribution to the logit, so a decline can be explained term by term.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

DECISION_FILE = Path(__file__).resolve().parent / "decision.json"
Outcome = Literal["answer", "not_confirmed", "decline"]
FIT_CS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0)  # L2 strengths tried by cross-validation
UNCOVERED_CAP = 3  # count signals (uncovered, unseen terms) stop growing here
LOGIT_CLIP = 6.0  # |logit| of a probability signal is capped: 0.0025..0.9975


def logit(p: float) -> float:
    """log(p / (1 - p)), clipped to ±LOGIT_CLIP so a certain model is not infinite."""
    p = min(max(p, 1e-9), 1 - 1e-9)
    return max(-LOGIT_CLIP, min(LOGIT_CLIP, math.log(p / (1 - p))))


class SignalSet:
    """A dataclass of named numeric signals, the input of a ``DecisionModel``."""

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]  # type: ignore[arg-type]

    def vector(self) -> list[float]:
        return [float(getattr(self, n)) for n in self.names()]

    def to_dict(self) -> dict[str, float]:
        return {k: round(float(v), 4) for k, v in asdict(self).items()}  # type: ignore[call-overload]


@dataclass
class Signals(SignalSet):
    """What the engine knows about a question and its evidence when it decides.

    Each field is one signal; its docstring is the comment after it. Flags
    are 0.0/1.0. The rules that used to decline alone are here as flags.
    """

    top_cosine: float = 0.0  # best dense cosine of any retrieved passage (was gate off_topic)
    unknown_name: float = 0.0  # the question names a term no abstract holds (was gate unknown_name)
    names_paper: float = 0.0  # the question names an indexed paper by its name or title
    pinned: float = 0.0  # the question is about papers the user chose
    overview: float = 0.0  # the question asks for a gist (summary, problem, contribution)
    followup: float = 0.0  # the question was interpreted against the conversation
    chose_nothing: float = 0.0  # the model chose no evidence sentence (was gate no_evidence)
    chosen_cosine: float = 0.0  # best cosine of a chosen sentence (was gate off_question_evidence)
    named_missing: float = 0.0  # a named paper has no sentence close to the question (was named_paper_missing)
    value_missing: float = 0.0  # a value is asked and no evidence states one (was value_not_stated)
    name_missing: float = 0.0  # a name is asked and no evidence states one (was name_not_stated)
    check_logit: float = 0.0  # logit of the check's P(the chosen sentences do not answer)
    check_pinned: float = 0.0  # check_logit for pinned papers, else 0 (the check leans "yes" there)
    check_overview: float = 0.0  # check_logit for overview questions, else 0 (any abstract answers those)
    coverage: float = 0.0  # IDF-weighted share of the question's terms that the evidence holds
    top_coverage: float = 0.0  # the same share for the best retrieved paper's whole abstract
    uncovered: float = 0.0  # distinctive question terms held by no chosen sentence nor title (capped at 3)
    ranker_agrees: float = 0.0  # the evidence includes the top retrieved (or named/pinned) paper
    unseen: float = 0.0  # question terms no indexed chunk holds (not question words; capped at 3)
    best_coverage: float = 0.0  # best share of the question's terms, unseen ones too, in one of the first few papers
    top_margin: float = 0.0  # best dense cosine minus that of the few-th retrieved paper

    def set_check(self, p_no: float) -> None:
        """The check's P(not answered), with the terms derived from it."""
        self.check_logit = logit(p_no)
        self.check_pinned = self.check_logit * self.pinned
        self.check_overview = self.check_logit * self.overview


@dataclass
class Decision:
    """The outcome, P(answered), and each signal's share of the logit."""

    outcome: Outcome
    p_answer: float
    signals: dict[str, float]
    contributions: dict[str, float] = field(default_factory=dict)
    model: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def strongest(self, n: int = 3) -> list[tuple[str, float]]:
        """The signals that moved the logit most, in either direction."""
        return sorted(self.contributions.items(), key=lambda kv: -abs(kv[1]))[:n]


class DecisionModel:
    """A fitted logistic regression over standardised signals (numpy-free at run time)."""

    def __init__(self, coef: dict[str, float], intercept: float, mean: dict[str, float],
                 scale: dict[str, float], name: str = "", meta: dict[str, Any] | None = None) -> None:
        self.coef, self.intercept, self.mean, self.scale = coef, intercept, mean, scale
        self.name, self.meta = name, meta or {}

    @classmethod
    def load(cls, path: Path | None = None) -> DecisionModel:
        d = json.loads((path or DECISION_FILE).read_text(encoding="utf-8"))
        return cls(d["coef"], d["intercept"], d["mean"], d["scale"], d.get("name", ""), d)

    def contributions(self, s: SignalSet) -> dict[str, float]:
        """Each signal's term of the logit: coef * (value - mean) / scale."""
        v = s.to_dict()
        return {n: round(self.coef.get(n, 0.0) * (v[n] - self.mean.get(n, 0.0))
                         / (self.scale.get(n) or 1.0), 4) for n in type(s).names()}

    def p_answer(self, s: SignalSet) -> float:
        z = self.intercept + sum(self.contributions(s).values())
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def decide(self, s: Signals, answer_at: float, decline_below: float) -> Decision:
        """``answer`` at P ≥ answer_at, ``decline`` below decline_below, else ``not_confirmed``."""
        p = self.p_answer(s)
        outcome: Outcome = ("answer" if p >= answer_at else
                            "decline" if p < decline_below else "not_confirmed")
        return Decision(outcome, round(p, 4), s.to_dict(), self.contributions(s), self.name)


# The direction each signal may push P(answered), a prior the fit keeps:
# +1 may only raise it, -1 only lower it; a signal not listed is free (the
# question's kind, and the check's interaction terms, which correct
# ``check_logit`` either way). Without it, coverage signals correlated with
# each other came out with opposite signs, and a question whose top paper
# held none of its terms gained log-odds of being answered (docs/decision.md).
SIGNS: dict[str, int] = {
    "top_cosine": 1, "chosen_cosine": 1, "coverage": 1, "top_coverage": 1, "best_coverage": 1,
    "ranker_agrees": 1, "top_margin": 1,
    "unknown_name": -1, "chose_nothing": -1, "named_missing": -1, "value_missing": -1,
    "name_missing": -1, "check_logit": -1, "uncovered": -1, "unseen": -1,
}


def _logistic(z: Any, y: Any, c: float, signs: list[int], weight: Any) -> tuple[Any, float]:
    """L2 logistic regression (sklearn's objective: C * weighted log loss +
    |w|^2 / 2, intercept unpenalised) with each coefficient held to its sign;
    hand-written because sklearn's LogisticRegression takes no bounds (scipy's
    L-BFGS-B does)."""
    import numpy as np
    from scipy.optimize import minimize

    n = z.shape[1]
    yy = 2 * np.asarray(y, dtype=float) - 1

    def loss(w: Any) -> tuple[float, Any]:
        m = yy * (z @ w[:n] + w[n])
        ll = weight * np.logaddexp(0, -m)
        g = -weight * yy / (1 + np.exp(m))  # d ll / d (z w + b)
        grad = np.append(c * (z.T @ g) + w[:n], c * g.sum())
        return float(c * ll.sum() + 0.5 * w[:n] @ w[:n]), grad

    bounds = [(0, None) if s > 0 else (None, 0) if s < 0 else (None, None) for s in signs]
    res = minimize(loss, np.zeros(n + 1), jac=True, method="L-BFGS-B", bounds=[*bounds, (None, None)])
    return res.x[:n], float(res.x[n])


def fit(rows: list[dict[str, float]], labels: list[int], *, folds: int = 5,
        seed: int = 0, names: list[str] | None = None, signs: dict[str, int] | None = None,
        weights: list[float] | None = None) -> tuple[dict[str, Any], list[float]]:
    """Fit the decision on signal rows (tune only): an L2 logistic regression,
    each coefficient held to its sign in ``signs`` (default none held), whose
    strength is chosen by cross-validated log loss. Returns the model as JSON
    data and each row's out-of-fold P(answered) (for the curve). ``weights``:
    each row's weight (rows sampled from a larger set count for the rows they
    stand for; default 1). ``names``:
    the signals to fit (default: the answer decision's ``Signals``; the
    per-paper citation model of ``rag.answer.paper_relevance`` passes its own)."""
    import numpy as np
    from sklearn.model_selection import StratifiedKFold

    names = names or Signals.names()
    signs = signs or {}
    sg = [signs.get(n, 0) for n in names]
    x = np.array([[float(r.get(n, 0.0)) for n in names] for r in rows])
    y = np.array(labels)
    wt = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    mean = np.average(x, axis=0, weights=wt)
    scale = np.sqrt(np.average((x - mean) ** 2, axis=0, weights=wt))
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    splits = list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(z, y))

    def out_of_fold(c: float) -> Any:
        p = np.zeros(len(y))
        for tr, te in splits:
            w, b = _logistic(z[tr], y[tr], c, sg, wt[tr])
            p[te] = 1 / (1 + np.exp(-(z[te] @ w + b)))
        return p

    def log_loss(p: Any) -> float:
        p = np.clip(p, 1e-12, 1 - 1e-12)
        return float(-np.average(y * np.log(p) + (1 - y) * np.log(1 - p), weights=wt))

    # The regularisation strength with the best out-of-fold log loss.
    oofs = {c: out_of_fold(c) for c in FIT_CS}
    c = min(FIT_CS, key=lambda c: log_loss(oofs[c]))
    oof = oofs[c]
    coef, intercept = _logistic(z, y, c, sg, wt)
    data = {
        "name": f"logistic-l2-C{c:g}" + ("-signed" if any(sg) else ""),
        "signals": names,
        "signs": {n: s for n, s in zip(names, sg, strict=True) if s},
        "coef": {n: round(float(w), 6) for n, w in zip(names, coef, strict=True)},
        "intercept": round(float(intercept), 6),
        "mean": {n: round(float(m), 6) for n, m in zip(names, mean, strict=True)},
        "scale": {n: round(float(s), 6) for n, s in zip(names, scale, strict=True)},
        "C": c,
        "n": int(len(y)),
        "positives": int(y.sum()),
    }
    return data, [float(p) for p in oof]


def curve(p: list[float], labels: list[int], steps: int = 41,
          weights: list[float] | None = None) -> list[dict[str, float]]:
    """The risk-coverage curve: per cut-off, the answered share of answerable
    questions, the declined share of unanswerable ones, and the precision of
    the answered ones (the share that are answerable); each question counts
    for its weight (default 1)."""
    wt = weights or [1.0] * len(p)
    pos = [(pi, w) for pi, y, w in zip(p, labels, wt, strict=True) if y]
    neg = [(pi, w) for pi, y, w in zip(p, labels, wt, strict=True) if not y]
    n_pos, n_neg = sum(w for _, w in pos), sum(w for _, w in neg)
    out = []
    for i in range(steps):
        t = i / (steps - 1)
        a_pos = sum(w for pi, w in pos if pi >= t)
        a_neg = sum(w for pi, w in neg if pi >= t)
        out.append({"cutoff": round(t, 3),
                    "answered_answerable": round(a_pos / (n_pos or 1), 3),
                    "declined_unanswerable": round(1 - a_neg / (n_neg or 1), 3),
                    "precision": round(a_pos / (a_pos + a_neg or 1), 3)})
    return out


def auc(p: list[float], labels: list[int]) -> float:
    """ROC AUC of P(answered) as a detector of answerable questions."""
    pos = [pi for pi, y in zip(p, labels, strict=True) if y]
    neg = [pi for pi, y in zip(p, labels, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return wins / (len(pos) * len(neg))
