"""The floor of a fan-out: every unavoidable step of the conditions' prefix tree (decode the source once, one
VP9 encode, one VP9 decode, each scale, fps and badge operation where the tree has it, each H.264 tail at its
own size and frame rate), each run alone as an ffmpeg CLI command with the same encoder settings. What a step
costs, its kind says (:attr:`transforms.steps.kind.StepKind.floor`).

A step's input frames come raw (``yuv4mpegpipe``) from a producer process whose cost is not counted: each
step's CPU seconds are its own process's, from ``os.wait4``. What our fan-out spends beyond the sum of these is
overhead; ``lastmile bench transforms`` reports the ratio.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

import ffmpeg

from transforms.errors import SpecError
from transforms.ffmpeg_graph import compile_command, normalized_input, source_geometry
from transforms.spec import Condition, Profile, Step, canonical_json
from transforms.steps.kind import CliChain, FloorInput, FloorStep
from transforms.steps.registry import STEPS

__all__ = ["FloorStep", "floor_steps", "measure_floor", "run_step"]

Y4M = {"format": "yuv4mpegpipe", "pix_fmt": "yuv420p", "strict": "-1"}


def floor_steps(src: Path, conditions: Sequence[Condition], profile: Profile, work: Path) -> list[FloorStep]:
    """The floor's commands for ``conditions`` (each at most one VP9 encode, first: the LastMile shape), each
    step's as its kind counts them (:attr:`transforms.steps.kind.StepKind.floor`)."""
    size, rotation = source_geometry(src)
    start = CliChain(None, size, profile, work, work / "out.mp4")  # the tails write files of their own
    steps = [FloorStep("decode source", compile_command(ffmpeg.input(str(src)).output("-", format="null")))]
    seen: set[str] = set()
    for cond in conditions:
        _check_shape(cond)
        for i, step in enumerate(cond.steps):
            key = canonical_json([s.model_dump(mode="json") for s in cond.steps[: i + 1]])
            if key in seen:
                continue
            seen.add(key)
            given = _input(cond.steps[:i], step, start, rotation, src, len(seen))
            steps += STEPS.get(step.kind).floor.steps(step, given)
    return steps


def _check_shape(cond: Condition) -> None:
    """The LastMile shape: every step in the floor and the CLI, a storage encode at most once and first, and the
    step that writes the output last."""
    kinds = [STEPS.get(s.kind) for s in cond.steps]
    storage = [i for i, k in enumerate(kinds) if k.floor is not None and k.floor.storage_file is not None]
    covered = all(k.floor is not None and k.cli is not None for k in kinds)
    if not covered or storage not in ([], [0]) or any(k.cli.final for k in kinds[:-1]):
        raise SpecError(f"the floor covers the LastMile shape (VP9 first, once; H.264 last): not {cond.name!r}")


def _input(prefix: tuple[Step, ...], step: Step, start: CliChain, rotation: int, src: Path, index: int) -> FloorInput:
    """What ``step`` after ``prefix`` is measured on: its frames, raw on stdin, from a producer process."""
    frames = _frames_after(prefix, start, rotation, src)
    producer = compile_command(frames.stream.output("pipe:", **Y4M))
    raw = frames.filtered(ffmpeg.input("pipe:", format="yuv4mpegpipe"))
    return FloorInput(raw, producer, "+".join(s.kind for s in (*prefix, step)), index)


def _frames_after(prefix: tuple[Step, ...], chain: CliChain, rotation: int, src: Path) -> CliChain:
    """A chain whose stream holds the frames that reach the end of ``prefix``, at their size."""
    first = STEPS.get(prefix[0].kind).floor if prefix else None
    if first is not None and first.storage_file is not None:  # from the storage encode's file, decoded once
        stream, rest = ffmpeg.input(str(chain.work / first.storage_file))["v"], prefix[1:]
    else:
        stream, rest = normalized_input(str(src), chain.size, rotation), prefix
    chain = chain.filtered(stream)
    for step in rest:
        chain = STEPS.get(step.kind).cli.apply(step, chain)
    return chain


def run_step(step: FloorStep) -> float:
    """CPU seconds of the step's own process (its producer's not counted)."""
    producer = None
    if step.producer:
        producer = subprocess.Popen(step.producer, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    consumer = subprocess.Popen(
        step.consumer,
        stdin=producer.stdout if producer else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if producer:
        producer.stdout.close()  # the consumer holds the read end
    _, status, usage = os.wait4(consumer.pid, 0)
    consumer.returncode = os.waitstatus_to_exitcode(status)
    err = consumer.stderr.read().decode(errors="replace")
    if producer:
        producer.wait()
    if consumer.returncode != 0:
        raise RuntimeError(f"floor step {step.name} failed ({consumer.returncode}): {err.strip()[:500]}")
    return usage.ru_utime + usage.ru_stime


def measure_floor(src: Path, conditions: Sequence[Condition], profile: Profile, work: Path) -> dict:
    """Each floor step's CPU seconds, in the order they run, and their sum."""
    steps = {}
    for step in floor_steps(src, conditions, profile, work):
        steps[step.name] = round(steps.get(step.name, 0.0) + run_step(step), 3)
    return {"cpu_s": round(sum(steps.values()), 3), "steps": steps}
