"""The report's "Flipped videos" section: per detector and condition, how many videos the condition flipped each
way, and the largest flips with their frame strips (:mod:`gateway.evaluation.flips`,
:mod:`gateway.evaluation.strips`), the harmful ones first.

A flip is judged by its video's label: a generated video flipped generated -> real is a **missed fake**, a real
video flipped real -> generated a **false alarm** (both harm: the condition made the detector wrong); a flip
towards the label is a **correction** (the condition made it right), and a video without a label is
**unlabelled**. Each kind is counted apart; the harmful ones (and the unlabelled, which may be) are shown, up to
:data:`SHOWN` each, in that order, with their strips; corrections are counted only (``lastmile flips`` lists
them), so that a report renders no strip of a flip that did no harm."""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.core.contenders import Contender
from gateway.core.messages import ScoreRow
from gateway.evaluation.flips import DIRECTIONS, ORIGINAL, Flip, FlipsError, find_flips, paired_count
from gateway.evaluation.paired import by_version
from gateway.evaluation.strips import FOLDER, RunRenderer, Strip, StripError

# flips shown per (detector, condition, kind) in a report, each with its strip
SHOWN = 3
ARROWS = {"real_to_generated": "real → generated", "generated_to_real": "generated → real"}
# what a flip is, by its direction and its video's label; harmful first
KINDS = {
    "missed_fake": "missed fakes (generated videos flipped generated → real)",
    "false_alarm": "false alarms (real videos flipped real → generated)",
    "correction": "corrections (flipped towards their label)",
    "unlabelled": "unlabelled videos",
}


# the kinds shown with strips; corrections are counted
DRAWN = ("missed_fake", "false_alarm", "unlabelled")


def kind_of(flip: Flip) -> str:
    """:data:`KINDS`' key of ``flip``."""
    if flip.label not in ("real", "generated"):
        return "unlabelled"
    if flip.direction == "generated_to_real":
        return "missed_fake" if flip.label == "generated" else "correction"
    return "false_alarm" if flip.label == "real" else "correction"


@dataclass
class FlipSection:
    """One detector (``NAME``, or ``NAME@VERSION`` where the run holds several versions) under one condition."""

    detector: str
    condition: str
    # videos scored on original and under the condition
    paired: int
    # per direction
    counts: dict[str, int]
    # per kind (KINDS), harmful first
    shown: dict[str, list[Strip]] = field(default_factory=dict)
    # per kind
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def flipped(self) -> int:
        return sum(self.counts.values())

    def as_json(self) -> dict:
        return {
            "detector": self.detector,
            "condition": self.condition,
            "paired_videos": self.paired,
            "flipped": self.counts,
            "kinds": self.kinds,
            "shown": {
                d: [_strip_json(st) for k in KINDS for st in self.shown.get(k, []) if st.flip.direction == d]
                for d in DIRECTIONS
            },
            "shown_by_kind": {k: [_strip_json(st) for st in self.shown.get(k, [])] for k in KINDS},
        }


def _strip_json(st: Strip) -> dict:
    return st.flip.as_json() | {"kind": kind_of(st.flip), "strip": None if st.path is None else str(st.path),
                                "note": st.note}  # fmt: skip


def flip_sections(
    rows: Sequence[ScoreRow],
    conditions: Sequence[str],
    run_dir: Path,
    shown: int = SHOWN,
    thresholds: dict[str, float] | None = None,
    workers: int | None = None,
) -> tuple[list[FlipSection], str | None]:
    """The sections, conditions in ``conditions``' order, and why no strip could be drawn (None where they could:
    a strip left out then says why on its own). ``shown`` 0: counts only, no strip rendered. Decisions at
    ``thresholds`` (per detector, as the report names them: the ones its metrics were decided at), else each row's
    own. The strips are drawn on ``workers`` threads (None: :meth:`RunRenderer.strips`'s default); a source the
    replay fetched over the network is not fetched again (:class:`~gateway.evaluation.strips.RunRenderer`)."""
    sections: list[FlipSection] = []
    # each detector's rows, read once
    by_name: dict[str, list[ScoreRow]] = defaultdict(list)
    for r in rows:
        by_name[r.detector].append(r)
    for detector in sorted({r.detector for r in by_version(rows)}):
        # NAME, or NAME@VERSION as the report names it
        mine = by_name[Contender.parse(detector).detector]
        for condition in (c for c in conditions if c != ORIGINAL):
            try:
                every = find_flips(mine, detector, condition, threshold=(thresholds or {}).get(detector))
            except FlipsError:
                # no scored row of this detector under this condition: nothing to count
                continue
            section = FlipSection(
                detector, condition, paired_count(mine, detector, condition), {d: len(every[d]) for d in DIRECTIONS}
            )
            by_kind: dict[str, list[Flip]] = {k: [] for k in KINDS}
            for flip in sorted((f for d in DIRECTIONS for f in every[d]), key=_largest_first):
                by_kind[kind_of(flip)].append(flip)
            section.kinds = {k: len(v) for k, v in by_kind.items()}
            # strips below
            section.shown = {k: v[: shown if k in DRAWN else 0] for k, v in by_kind.items()}
            sections.append(section)
    wanted: list[Flip] = [f for s in sections for k in KINDS for f in s.shown[k]]
    why = None
    try:
        strips = iter(RunRenderer(run_dir).strips(wanted, workers)) if wanted else iter(())
    except StripError as exc:
        why = str(exc)
        strips = iter(Strip(f, None, why) for f in wanted)
    for s in sections:
        s.shown = {k: [next(strips) for _ in s.shown[k]] for k in KINDS}
    return sections, why


def _largest_first(flip: Flip) -> tuple:
    return (-abs(flip.change), flip.video_id, flip.detector_version)


def clear_strips(run_dir: Path) -> None:
    """Remove the strips of an earlier report of this run (a report lists only the strips it drew)."""
    shutil.rmtree(run_dir / FOLDER, ignore_errors=True)
