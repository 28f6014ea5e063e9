"""The report's "Flipped videos" section: per detector and condition, how many videos the condition flipped each
way, and the largest flips with their frame strips (:mod:`gateway.evaluation.flips`,
:mod:`gateway.evaluation.strips`)."""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gateway.core.messages import ScoreRow
from gateway.evaluation.flips import DIRECTIONS, ORIGINAL, Flip, FlipsError, find_flips, paired_count
from gateway.evaluation.paired import by_version
from gateway.evaluation.strips import FOLDER, RunRenderer, Strip, StripError

SHOWN = 2  # flips shown per (detector, condition, direction) in a report, each with its strip
ARROWS = {"real_to_generated": "real → generated", "generated_to_real": "generated → real"}


@dataclass
class FlipSection:
    """One detector (``NAME``, or ``NAME@VERSION`` where the run holds several versions) under one condition."""

    detector: str
    condition: str
    paired: int  # videos scored on original and under the condition
    counts: dict[str, int]
    shown: dict[str, list[Strip]] = field(default_factory=dict)

    @property
    def flipped(self) -> int:
        return sum(self.counts.values())

    def as_json(self) -> dict:
        return {
            "detector": self.detector,
            "condition": self.condition,
            "paired_videos": self.paired,
            "flipped": self.counts,
            "shown": {
                d: [s.flip.as_json() | {"strip": None if s.path is None else str(s.path), "note": s.note} for s in v]
                for d, v in self.shown.items()
            },
        }


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
    by_name: dict[str, list[ScoreRow]] = defaultdict(list)  # each detector's rows, read once
    for r in rows:
        by_name[r.detector].append(r)
    for detector in sorted({r.detector for r in by_version(rows)}):  # NAME, or NAME@VERSION as the report names it
        mine = by_name[detector.partition("@")[0]]
        for condition in (c for c in conditions if c != ORIGINAL):
            try:
                every = find_flips(mine, detector, condition, threshold=(thresholds or {}).get(detector))
            except FlipsError:
                continue  # no scored row of this detector under this condition: nothing to count
            section = FlipSection(
                detector, condition, paired_count(mine, detector, condition), {d: len(every[d]) for d in DIRECTIONS}
            )
            section.shown = {d: every[d][:shown] for d in DIRECTIONS}  # Flips for now, strips below
            sections.append(section)
    wanted: list[Flip] = [f for s in sections for d in DIRECTIONS for f in s.shown[d]]
    why = None
    try:
        strips = iter(RunRenderer(run_dir).strips(wanted, workers)) if wanted else iter(())
    except StripError as exc:
        why = str(exc)
        strips = iter(Strip(f, None, why) for f in wanted)
    for s in sections:
        s.shown = {d: [next(strips) for _ in s.shown[d]] for d in DIRECTIONS}
    return sections, why


def clear_strips(run_dir: Path) -> None:
    """Remove the strips of an earlier report of this run (a report lists only the strips it drew)."""
    shutil.rmtree(run_dir / FOLDER, ignore_errors=True)
