"""What a report adds for chat detectors (multimodal LLMs; RA-Bench §B.3): the replies that said no verdict, the
tokens a run used, and for a diagnostic prompt the AUC of each aspect and the collapse rate.

- **Aspect AUC**: a cell's paired AUC (per source against matched real anchors, sources weighted equally) with
  each row's score taken to be the aspect's value; its interval and its drift from ``original`` come from the
  cells' own anchor-clustered bootstrap (:class:`~gateway.evaluation.cells.Layout`), as the rating AUC's do.
- **Collapse** (RA-Bench: "exact-five collapse"): the share of the cell's parsed diagnostic replies that give every
  aspect the same value, with Wilson's 95 % interval.
- **Unparsed**: the cell's ``UnparsedReply`` rows; they are also failures (a miss of their class in FakeR and RealR,
  outside every AUC).
- **Tokens**: the replies' ``usage``, summed; a reply read from the cache counts apart (nothing paid for it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from detectors.stats.bootstrap import percentile_interval
from detectors.stats.intervals import wilson_interval
from gateway.core.messages import ScoreRow
from gateway.evaluation.cells import Layout

Interval = tuple[float, float]


@dataclass
class AspectAuc:
    auc: float
    auc_ci: Interval
    drift: float | None = None
    drift_ci: Interval | None = None


@dataclass
class ChatCell:
    """One (chat detector, condition)."""

    detector: str
    condition: str
    # rows with a reply, parsed or not
    replies: int
    unparsed: int
    # paid for: replies not read from the cache
    tokens_in: int
    tokens_out: int
    # replies read from the cache
    cached: int
    aspects: dict[str, AspectAuc] = field(default_factory=dict)
    # parsed replies with aspects
    diagnosed: int = 0
    collapsed: int = 0
    collapse: float = float("nan")
    collapse_ci: Interval = (float("nan"), float("nan"))


def aspects_of(row: ScoreRow) -> dict[str, float] | None:
    """A row's diagnostic aspects (None: it has none)."""
    return json.loads(row.aspects) if row.aspects else None


def chat_cells(
    layout: Layout, selections: dict[tuple[str, str], list[ScoreRow]], thresholds: dict[str, float]
) -> list[ChatCell]:
    """A :class:`ChatCell` for every (detector, condition) selection whose rows come from the chat runtime, in the
    selections' order."""
    out, per_aspect, boots = [], {}, {}
    for (det, cond), sel in selections.items():
        if not any(r.runtime == "chat" for r in sel):
            continue
        paid = [r for r in sel if r.cached is not True]
        # read once per row; every aspect's AUC reads them
        parsed = [aspects_of(r) for r in sel]
        given = [a for a in parsed if a]
        cell = ChatCell(
            det,
            cond,
            replies=sum(r.error is None or r.error_kind == "reply" for r in sel),
            unparsed=sum(r.error_kind == "reply" for r in sel),
            tokens_in=sum(r.tokens_in or 0 for r in paid),
            tokens_out=sum(r.tokens_out or 0 for r in paid),
            cached=sum(r.cached is True for r in sel),
            diagnosed=len(given),
            collapsed=sum(len(set(a.values())) == 1 for a in given),
        )
        if given:
            cell.collapse, low, high = wilson_interval(cell.collapsed, cell.diagnosed)
            cell.collapse_ci = (low, high)
        for name in dict.fromkeys(k for a in given for k in a):
            rows = [r.model_copy(update={"score": (a or {}).get(name)}) for r, a in zip(sel, parsed, strict=True)]
            computed = layout.cell(det, cond, rows, thresholds[det])
            per_aspect[det, cond, name], boots[det, cond, name] = rows, computed
            cell.aspects[name] = AspectAuc(computed[0].auc, computed[0].auc_ci)
        out.append(cell)
    for cell in out:
        if cell.condition == "original":
            continue
        for name, aspect in cell.aspects.items():
            keys = [(cell.detector, cell.condition, name), (cell.detector, "original", name)]
            if keys[1] not in boots:
                continue
            (here, auc), (there, auc0) = layout.aucs_on_same_videos(keys, per_aspect, boots)
            aspect.drift, aspect.drift_ci = here - there, percentile_interval(auc - auc0)
    return out
