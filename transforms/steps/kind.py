"""What a step kind is: one unit that owns its spec model, its engine node, its ffmpeg-CLI equivalent, its floor
cost and its pass scheduling. The engine, the CLI cross-check (:mod:`transforms.ffmpeg_cli`), the floor
(:mod:`transforms.floor`) and the pass scheduler (:mod:`transforms.passes`) look a step's kind up in the registry
(:mod:`transforms.steps.registry`) and call what it provides; none of them names a kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from transforms.ffmpeg_graph import FrameSize, compile_command
from transforms.nodes import Node
from transforms.profile import Profile

FROZEN = ConfigDict(extra="forbid", frozen=True)


class StepSpec(BaseModel):
    """A step's spec model: frozen, no unknown keys, and a ``kind`` literal (with that default) as its union tag."""

    model_config = FROZEN
    kind: str


S = TypeVar("S", bound=StepSpec)
Size = tuple[int, int]  # (width, height) of frames


@dataclass(frozen=True)
class NodeContext:
    """What a step's engine node may need beside its step."""

    profile: Profile
    rate: Fraction  # the frame rate of the frames the node takes
    sessions: Counter[str]  # encoder sessions opened, by encoder: a node that opens one counts it here


@dataclass(frozen=True)
class CliChain:
    """A condition's ffmpeg-CLI equivalent as it is built, step by step: processes piped into each other."""

    stream: Any  # the ffmpeg-python stream of the frames so far (None after the process that writes ``output``)
    size: FrameSize  # their size
    profile: Profile
    work: Path  # a scratch folder (a badge's PNG, ...)
    output: Path  # where the last process writes the variant
    commands: tuple[list[str], ...] = ()  # the processes so far, in order

    def filtered(self, stream: Any, size: FrameSize | None = None) -> CliChain:
        """The chain with ``stream`` (filters added to the current process) and, if it changed, the size."""
        return replace(self, stream=stream, size=size or self.size)

    def then(self, command: list[str], stream: Any = None) -> CliChain:
        """The chain with one more process, ``command``; ``stream`` is what the next one reads (its stdin)."""
        return replace(self, commands=(*self.commands, command), stream=stream)


@dataclass(frozen=True)
class CliEquivalent(Generic[S]):
    """A step's ffmpeg-CLI equivalent: ``apply`` adds it to a chain, as filters or as a process of its own."""

    apply: Callable[[S, CliChain], CliChain]
    final: bool = False  # it writes the chain's output: nothing may follow it on the CLI


@dataclass(frozen=True)
class FloorStep:
    """One command of the floor: ``consumer``'s CPU time is counted, its ``producer``'s is not."""

    name: str
    consumer: list[str]
    producer: list[str] | None = None  # feeds the consumer's stdin; not counted


@dataclass(frozen=True)
class FloorInput:
    """What a step's floor cost is measured on: its input frames, raw from a producer process."""

    chain: CliChain  # its stream: the raw frames (read from stdin), at their size
    producer: list[str]  # the process that makes them (not counted)
    label: str  # the kinds of the condition's steps up to this one, joined by "+"
    index: int  # distinct prefixes so far: names this step's scratch files


@dataclass(frozen=True)
class FloorCost(Generic[S]):
    """A step's share of the floor: its commands, each run alone with the same settings."""

    steps: Callable[[S, FloorInput], list[FloorStep]]
    storage_file: str | None = None  # a storage encode's output in the work folder: the floor runs it once, first,
    # and the steps after it read their frames from that file (decoded once, as the engine decodes it once)


def filter_alone(apply: Callable[[S, CliChain], CliChain]) -> FloorCost[S]:
    """The floor cost of a filter: its CLI equivalent ``apply`` alone, on raw frames, into ffmpeg's null muxer."""

    def steps(step: S, given: FloorInput) -> list[FloorStep]:
        out = apply(step, given.chain).stream.output("-", format="null")
        return [FloorStep(f"{step.kind} ({given.label})", compile_command(out), given.producer)]

    return FloorCost(steps)


@dataclass(frozen=True)
class Scheduling:
    """How the pass scheduler treats a step's node (:mod:`transforms.passes`)."""

    encoder_bytes: Callable[[Node, Profile], int] | None = None  # the estimated resident bytes of the encoder the
    # node opens (transforms.memory); None: it opens none. A node that opens one runs on a thread of its own.
    replayable: bool = False  # it keeps its output and feeds it again to later passes of its children
    # (keep_packets, replay, decode_apart: transforms.passes.Replayable)


def keep_rate(step: StepSpec, rate: Fraction) -> Fraction:
    return rate


def keep_size(step: StepSpec, size: Size) -> Size:
    return size


@dataclass(frozen=True)
class StepKind(Generic[S]):
    """One step kind, everything about it in one place. Register it (:mod:`transforms.steps.registry`) and a
    condition may use it: the spec validates it, the engine runs it; with ``cli`` the CLI cross-check covers it,
    with ``floor`` (and ``cli``) the floor does."""

    model: type[S]  # its spec model; the default of its ``kind`` field names the kind
    node: Callable[[S, NodeContext], Node]  # its engine node
    cli: CliEquivalent[S] | None = None  # None: the engine only
    floor: FloorCost[S] | None = None  # None: not in the floor
    scheduling: Scheduling = Scheduling()
    rate_after: Callable[[S, Fraction], Fraction] = keep_rate  # the frame rate of its output
    size_after: Callable[[S, Size], Size] = keep_size  # the frame size of its output

    @property
    def name(self) -> str:
        return str(self.model.model_fields["kind"].default)
