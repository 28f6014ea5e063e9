"""The champion-vs-challenger dashboard: one row of panels per comparison (Grafana repeats them per value of the
``challenger`` variable), from the monitor's comparison series (:mod:`gateway.monitor.comparisons`)."""

from __future__ import annotations

from gateway.core import catalogue as mc
from gateway.core.catalogue import Family
from gateway.ops.panels import dashboard, panel, repeated, variable

SEL = (
    'champion=~"$champion", challenger=~"$challenger", population=~"$population", condition=~"$condition", '
    'window="time"'
)
LEGEND = "{{challenger}} vs {{champion}} {{condition}} ({{population}})"


def _banded(family: Family) -> list[tuple[str, str]]:
    lower, upper = family.bounds()
    return [
        (f"{f.name}{{{SEL}}}", LEGEND + suffix) for f, suffix in ((family, ""), (lower, " lower"), (upper, " upper"))
    ]


def _repeated(p):
    return repeated(p, "challenger")


def comparisons() -> dict:
    """Per comparison: the robustness difference and the AUC difference with their DeLong intervals, the FakeR
    difference, and the label-free disagreement and flip-rate difference, with the paired sample sizes."""
    panels = [
        _repeated(
            panel(
                1,
                "Robustness difference $challenger (challenger minus champion AUC drift), DeLong 95%",
                _banded(mc.COMPARISON_ROBUSTNESS_DIFFERENCE),
                0,
                0,
                minmax=(-1, 1),
            )
        ),
        _repeated(
            panel(
                2,
                "AUC difference $challenger minus champion, DeLong 95%",
                _banded(mc.COMPARISON_AUC_DIFFERENCE),
                12,
                0,
                minmax=(-1, 1),
            )
        ),
        _repeated(
            panel(
                3,
                "FakeR difference $challenger minus champion, Newcombe 95%",
                _banded(mc.COMPARISON_FAKE_RECALL_DIFFERENCE),
                0,
                8,
                minmax=(-1, 1),
            )
        ),
        _repeated(
            panel(
                4,
                "Label-free: disagreement and flip-rate difference ($challenger)",
                [
                    (f"{mc.COMPARISON_DISAGREEMENT.name}{{{SEL}}}", LEGEND + " disagree"),
                    (f"{mc.COMPARISON_FLIP_RATE_DIFFERENCE.name}{{{SEL}}}", LEGEND + " Δflip"),
                ],
                12,
                8,
                minmax=(-1, 1),
            )
        ),
        _repeated(
            panel(
                5,
                "Paired videos ($challenger): all and labelled",
                [
                    (f"{mc.COMPARISON_VIDEOS.name}{{{SEL}}}", LEGEND + " videos"),
                    (f"{mc.COMPARISON_SAMPLES.name}{{{SEL}}}", LEGEND + " labelled"),
                ],
                0,
                16,
                w=24,
                unit="short",
                minmax=None,
            )
        ),
    ]
    variables = [
        variable("champion", f"label_values({mc.COMPARISON_MARGIN.name}, champion)"),
        variable("challenger", f'label_values({mc.COMPARISON_MARGIN.name}{{champion=~"$champion"}}, challenger)'),
        variable("population", f"label_values({mc.COMPARISON_MARGIN.name}, population)"),
        variable("condition", f"label_values({mc.COMPARISON_VIDEOS.name}, condition)"),
    ]
    return dashboard("lastmile-comparisons", "LastMile champion vs challenger", panels, variables, ["lastmile", "ab"])
