"""What went wrong in a run, told loudly: error rows grouped by kind and class, and the (detector, condition)
cells left without a single score. The replay and the demo exit non-zero on it; the report opens with it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gateway.core.messages import ScoreRow
from gateway.core.wording import counted
from transforms.support.config_errors import one_line

DEFAULT_MAX_INFRA_ERRORS = 0  # infrastructure-error rows a run may have and still succeed (`--max-infra-errors`)


@dataclass(frozen=True)
class ErrorGroup:
    """The error rows of one kind (``video``: the input's own fault; ``infra``: anything else) and class."""

    kind: str
    error_class: str
    rows: int
    videos: int
    first_message: str

    def line(self) -> str:
        hint = next((h for cue, h in HINTS.items() if cue in self.first_message), "")
        return (
            f"{self.kind} error {self.error_class}: {counted(self.rows, 'row')} ({counted(self.videos, 'video')}); "
            f"first: {self.first_message}{hint}"
        )


RERUN = "; a --resume keeps these rows: run again into a new --out"  # (a refused video's rows are its outcome)
HINTS = {  # a first message's cue -> what to do about it, added to its line
    "outside the allowed roots": f" (a replay reads under its manifest's folder and those given by --file-root{RERUN})",
    "not in the allow-list": f" (a replay fetches http(s):// only from the hosts given by --http-allow-host{RERUN})",
}


@dataclass(frozen=True)
class RunFailures:
    """A run's error groups, its cells without a score, and whether that breaks the run's bound."""

    groups: list[ErrorGroup]
    empty_cells: list[tuple[str, str]]  # (detector, condition)
    rows: int
    max_infra_errors: int = DEFAULT_MAX_INFRA_ERRORS

    @property
    def infra_rows(self) -> int:
        return sum(g.rows for g in self.groups if g.kind == "infra")

    @property
    def video_rows(self) -> int:
        return sum(g.rows for g in self.groups if g.kind == "video")

    @property
    def failed(self) -> bool:
        """True where the run must not count as a success: no rows, a cell with no score, or too many infra
        errors."""
        return not self.rows or bool(self.empty_cells) or self.infra_rows > self.max_infra_errors

    def lines(self, with_bound: bool = True) -> list[str]:
        """One line per error kind and class, then one per detector with cells without a score (empty when all is
        well); with ``with_bound``, a last line when infrastructure errors exceed the run's bound (a command's
        judgement)."""
        out = [] if self.rows else ["the run has no result rows at all"]
        out += [g.line() for g in self.groups]
        out += self._empty_lines()
        if with_bound and self.infra_rows > self.max_infra_errors:
            out.append(
                f"{counted(self.infra_rows, 'infrastructure-error row')} of {self.rows}, more than the "
                f"{self.max_infra_errors} allowed (--max-infra-errors)"
            )
        return out

    def _empty_lines(self) -> list[str]:
        """One line per detector with cells without a score, naming its conditions (a run where every video
        failed said 24 lines, one per cell)."""
        by_detector: dict[str, list[str]] = {}
        for detector, condition in self.empty_cells:
            by_detector.setdefault(detector, []).append(condition)
        return [
            f"no score at all for detector {d} under condition{'s' if len(cs) > 1 else ''} {', '.join(cs)}"
            for d, cs in by_detector.items()
        ]


def summarize(
    rows: Iterable[ScoreRow],
    max_infra_errors: int = DEFAULT_MAX_INFRA_ERRORS,
    expected: Iterable[tuple[str, str]] = (),
) -> RunFailures:
    """Group a run's error rows by (kind, class) in the order first met, and list the cells without a score:
    the ``expected`` (detector, condition) cells and every cell that has rows."""
    rows = list(rows)
    groups: dict[tuple[str, str], dict] = {}
    scored: set[tuple[str, str]] = set()
    cells: dict[tuple[str, str], None] = dict.fromkeys(expected)
    for r in rows:
        cells.setdefault((r.detector, r.condition))
        if r.error is None and (r.score is not None or r.decision is not None):  # (a verdict may come alone)
            scored.add((r.detector, r.condition))
            continue
        key = (r.error_kind or "infra", r.error_class or "Error")
        g = groups.setdefault(key, {"rows": 0, "videos": set(), "first": r.error or "no score and no error"})
        g["rows"] += 1
        g["videos"].add(r.video_id)
    return RunFailures(
        groups=[
            ErrorGroup(kind, cls, g["rows"], len(g["videos"]), one_line(g["first"]))
            for (kind, cls), g in groups.items()
        ],
        empty_cells=[cell for cell in cells if cell not in scored],
        rows=len(rows),
        max_infra_errors=max_infra_errors,
    )


def check_results(path: Path, max_infra_errors: int = DEFAULT_MAX_INFRA_ERRORS) -> RunFailures:
    """:func:`summarize` over a results file (``results.parquet``)."""
    from gateway.batch.results import read_results

    return summarize(read_results(path), max_infra_errors)
