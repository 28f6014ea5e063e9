"""The quantities of a champion-against-challenger comparison, each defined once: its name, its sign (challenger
minus champion), and which of a video's scores it needs. The offline comparison (:mod:`gateway.evaluation.compare`,
the anchor-clustered bootstrap) and the live one (:mod:`gateway.monitor.comparisons`, DeLong and Newcombe) both
take them from here and keep their own method; docs/ab.md sets the two side by side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

ROLES = ("champion", "challenger")
ORIGINAL = "original"

# a float, or an array of them (the bootstrap's replicates)
Value = TypeVar("Value")


@dataclass(frozen=True)
class Quantity:
    """One quantity of a comparison under a condition."""

    name: str
    """Its key in ``comparison.json``, and its live series ``lastmile_comparison_<name>``."""
    heading: str
    """Its column in the report's table."""
    meaning: str
    """What it measures, its sign and the videos it counts, in one sentence."""
    labelled: bool
    """Whether it needs each video's label."""
    against_original: bool = False
    """Whether it measures a change from ``original`` (then it is undefined on ``original`` itself)."""
    signed: bool = True
    """A difference, in points; False: a share, in %."""

    @property
    def series(self) -> str:
        """The monitor's series of it."""
        return f"lastmile_comparison_{self.name}"

    def defined_under(self, condition: str) -> bool:
        """Whether it has a value under ``condition``."""
        return not (self.against_original and condition == ORIGINAL)

    def needs(self, condition: str) -> tuple[tuple[str, str], ...]:
        """The (role, condition) scores a video must have to count under ``condition``: both contenders' under it
        and, for a change from ``original``, both under ``original`` too; champion first, each role's condition
        before ``original``."""
        conditions = (condition, ORIGINAL) if self.against_original and condition != ORIGINAL else (condition,)
        return tuple((role, c) for role in ROLES for c in conditions)


AUC_DIFFERENCE = Quantity(
    "auc_difference", "ΔAUC", "the challenger's AUC minus the champion's, on the videos both scored", labelled=True
)
ROBUSTNESS_DIFFERENCE = Quantity(
    "robustness_difference",
    "Δrobustness",
    "the challenger's AUC under the condition minus on original, minus the same for the champion, on the videos "
    "all four AUCs scored (below 0: the challenger loses more)",
    labelled=True,
    against_original=True,
)
FAKE_RECALL_DIFFERENCE = Quantity(
    "fake_recall_difference",
    "ΔFakeR",
    "the challenger's FakeR minus the champion's, each at its own threshold (a failure is that detector's miss)",
    labelled=True,
)
REAL_RECALL_DIFFERENCE = Quantity(
    "real_recall_difference",
    "ΔRealR",
    "the challenger's RealR minus the champion's, each at its own threshold (a failure is that detector's miss)",
    labelled=True,
)
DISAGREEMENT = Quantity(
    "disagreement",
    "disagree",
    "the share of the videos both decided that the two decide differently",
    labelled=False,
    signed=False,
)
FLIP_RATE_DIFFERENCE = Quantity(
    "flip_rate_difference",
    "Δflip rate",
    "the challenger's flip rate minus the champion's (a flip: a decision under the condition other than on "
    "original), on the videos both decided under both",
    labelled=False,
    against_original=True,
)
QUANTITIES = (
    AUC_DIFFERENCE,
    ROBUSTNESS_DIFFERENCE,
    FAKE_RECALL_DIFFERENCE,
    REAL_RECALL_DIFFERENCE,
    DISAGREEMENT,
    FLIP_RATE_DIFFERENCE,
)


def difference(challenger: Value, champion: Value) -> Value:
    """Challenger minus champion: the sign of every difference of a comparison.

    Parameters
    ----------
    challenger, champion : float or ndarray
        The same statistic of each contender (arrays: per bootstrap replicate).

    Returns
    -------
    float or ndarray
        Above 0 where the challenger's is higher.
    """
    return challenger - champion


def robustness_difference(champion: tuple[Value, Value], challenger: tuple[Value, Value]) -> Value:
    """The challenger's change from ``original`` minus the champion's.

    Parameters
    ----------
    champion, challenger : tuple of (float or ndarray, float or ndarray)
        Each contender's statistic (its AUC) under the condition and on ``original``, in that order
        (:meth:`Quantity.needs`'s order).

    Returns
    -------
    float or ndarray
        (challenger under the condition - on original) - (champion under the condition - on original); below 0 the
        challenger loses more.
    """
    return difference(challenger[0] - challenger[1], champion[0] - champion[1])


def scores_needed(condition: str) -> tuple[tuple[str, str], ...]:
    """Every (role, condition) score some quantity under ``condition`` needs (:meth:`Quantity.needs`)."""
    return tuple(dict.fromkeys(key for q in QUANTITIES for key in q.needs(condition)))
