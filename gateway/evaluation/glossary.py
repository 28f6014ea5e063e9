"""The report's glossary: one definition per metric the report shows, written from what the code computes
(:mod:`detectors.stats.metrics` for the formulas, :mod:`gateway.evaluation.paired` for how they are paired, averaged
over sources and bootstrapped), so that a reader can check a number without reading the code."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.evaluation.paired import Evaluation
from gateway.evaluation.sweeps import AUC_BREAK, sweeps_of
from gateway.evaluation.tables import RESOLVES
from gateway.evaluation.thresholds import UNDECIDED


@dataclass(frozen=True)
class Term:
    # as it appears in the tables' headings
    term: str
    definition: str


_PER_SOURCE = (
    "computed per generation source (its generated videos against the real anchors they are paired with) "
    "and averaged over sources with equal weight"
)


def glossary(ev: Evaluation) -> list[Term]:
    """Every metric and mark the report uses, in the order a reader meets them."""
    terms = [
        Term(
            "AUC",
            "Area under the ROC curve of generated (positive) against matched real (negative) videos, by the "
            "Mann-Whitney statistic: the share of (generated, real) pairs in which the generated video scores "
            f"higher, ties counted 1/2; {_PER_SOURCE}. 50 is chance, 100 a perfect ranking. Only scored videos "
            "enter it: failures are counted beside it, not in it.",
        ),
        Term(
            "95% CI",
            f"Anchor-clustered bootstrap interval: {ev.replicates} replicates (seed {ev.seed}) each resample the "
            "real anchors with replacement, every resampled anchor bringing its real video and all its generated "
            "counterparts, stratified by the set of sources an anchor is linked to; the interval is the 2.5th and "
            "97.5th percentiles of the replicates where the metric is defined (percentile method). The anchor is "
            "the unit of resampling, so with few anchors the interval is rough. Shown in brackets after a value.",
        ),
        Term(
            "drift",
            "metric(condition) - metric(original) on the same videos, in percentage points, with a paired "
            "interval. AUC drift: on the videos scored under both conditions (a video that failed under one leaves "
            "both AUCs of the drift, not the cells' own), and one anchor draw serves both conditions in each "
            "bootstrap replicate, so the difference keeps their covariance. FakeR and RealR drift: the interval "
            "is the hull of that paired bootstrap's and Newcombe's (1998) paired score interval, method 10, on the "
            "videos "
            "decided under both conditions (a failure a miss), as the protocol asks of differences of paired "
            "proportions: the bootstrap keeps an anchor's videos together, Newcombe's does not collapse to zero "
            "width when no video changed its decision. An interval that excludes 0 is a change beyond "
            "sampling noise at the 95% level.",
        ),
        Term(
            "mean",
            "The mean over detectors (each detector weighted equally) of the metric in that column.",
        ),
        Term(
            "Spearman",
            "Spearman rank correlation between the detectors' AUCs on original and under a condition (the "
            "Pearson correlation of their average ranks): 1 means the same order, -1 the reverse. Undefined "
            "(shown -) with fewer than two detectors or when every AUC on one side is equal; with two detectors "
            "it can only be +1 or -1.",
        ),
        Term(
            "FakeR",
            "Recall on generated videos at the fixed threshold: TP / (TP + FN), a video being flagged generated "
            f"when its score >= the threshold; a generated video that failed counts as a miss; {_PER_SOURCE}. "
            "The threshold (the model card's, or calibrated on original) is fixed once and held for every "
            "condition, so a drop in FakeR is the operating point drifting toward Real. "
            + UNDECIDED.format(metrics="FakeR, RealR, BAcc, macro-F1 and their drifts"),
        ),
        Term(
            "RealR",
            "Recall on real videos at the same fixed threshold: TN / (TN + FP), a real video kept as real when "
            f"its score < the threshold; a real video that failed counts as a miss; {_PER_SOURCE}.",
        ),
        Term("BAcc", f"Balanced accuracy, (FakeR + RealR) / 2 at the fixed threshold; {_PER_SOURCE}."),
        Term(
            "macro-F1",
            "The mean over the two classes of F1 = 2 TP / (2 TP + FP + FN), each class taken as positive in turn, "
            "at the fixed threshold; a class with no true and no predicted member has F1 = 0; "
            f"{_PER_SOURCE}.",
        ),
        Term(
            "T@1%",
            "True-positive rate at 1% false-positive rate: the largest TPR (share of generated videos flagged) "
            "among the points of the complete ROC (every distinct score a threshold, no interpolation) whose "
            f"FPR <= 1%; {_PER_SOURCE}. Random ranking gives about 1%. Marked * when a source has fewer than "
            f"{RESOLVES[0.01]} real videos, too few to resolve an FPR of 1%.",
        ),
        Term(
            "T@5%",
            "As T@1%, at 5% false-positive rate: the largest TPR among complete-ROC points whose FPR <= 5%. "
            f"Random ranking gives about 5%. Marked * under {RESOLVES[0.05]} real videos per source.",
        ),
        Term(
            "F@95%",
            "False-positive rate at 95% true-positive rate: the smallest FPR among the points of the complete "
            f"ROC whose TPR >= 95%; {_PER_SOURCE}. Random ranking gives about 95%; lower is better.",
        ),
        Term(
            "failures",
            "Video-error rows of a cell (the input or its variant could not be decoded or scored), counted per "
            "source pairing (a failed real video once for each source it is paired with): kept in the FakeR/RealR "
            "denominators as misses, absent from AUC, T@x% and F@95%. Infrastructure errors (the scorer was "
            "unavailable) are counted apart, in the banner at the top, and enter no metric.",
        ),
        Term(
            "†",
            "A zero-width interval: every bootstrap replicate gave the same value (typically a class separated "
            "perfectly, or missed entirely, on few anchors). It shows no variation in this sample, not certainty.",
        ),
    ]
    if sweeps_of(ev.conditions):
        terms.append(
            Term(
                "breaks at",
                "A sweep's breaking point: the mildest value tried whose paired AUC drift interval (vs original) "
                f"lies wholly below {100 * AUC_BREAK:+.0f} points; FakeR halved: the mildest value at which FakeR, "
                "at the threshold fixed on original, falls under half its value on original.",
            )
        )
    return terms


def term_for(heading: str, terms: list[Term]) -> Term | None:
    """The glossary entry a table heading uses (the longest term it contains), or None."""
    found = [t for t in terms if t.term in heading]
    return max(found, key=lambda t: len(t.term)) if found else None
