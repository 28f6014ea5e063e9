"""The floor of a fan-out: every unavoidable step of the conditions' prefix tree (decode the source once, one
VP9 encode, one VP9 decode, each scale, fps and badge operation where the tree has it, each H.264 tail at its
own size and frame rate), each run alone as an ffmpeg CLI command with the same encoder settings.

A step's input frames come raw (``yuv4mpegpipe``) from a producer process whose cost is not counted: each
step's CPU seconds are its own process's, from ``os.wait4``. What our fan-out spends beyond the sum of these is
overhead; ``lastmile bench transforms`` reports the ratio.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import ffmpeg

from transforms import ffmpeg_cli
from transforms.errors import SpecError
from transforms.spec import Condition, Profile, Step, canonical_json

Y4M = {"format": "yuv4mpegpipe", "pix_fmt": "yuv420p", "strict": "-1"}


@dataclass(frozen=True)
class FloorStep:
    name: str
    consumer: list[str]
    producer: list[str] | None = None  # feeds the consumer's stdin; not counted


def _compile(stream) -> list[str]:
    return stream.compile(cmd=[ffmpeg_cli.ffmpeg_exe(), "-nostdin", "-v", "error"], overwrite_output=True)


def floor_steps(src: Path, conditions: Sequence[Condition], profile: Profile, work: Path) -> list[FloorStep]:
    """The floor's commands for ``conditions`` (each at most one VP9 encode, first: the LastMile shape)."""
    size, rotation = ffmpeg_cli._source_geometry(src)
    vp9_file = work / "vp9.webm"
    steps = [FloorStep("decode source", _compile(ffmpeg.input(str(src)).output("-", format="null")))]
    seen: set[str] = set()
    for cond in conditions:
        kinds = [s.kind for s in cond.steps]
        if kinds.count("vp9") > 1 or ("vp9" in kinds and kinds[0] != "vp9") or "h264" in kinds[:-1]:
            raise SpecError(f"the floor covers the LastMile shape (VP9 first, once; H.264 last): not {cond.name!r}")
        for i, step in enumerate(cond.steps):
            key = canonical_json([s.model_dump(mode="json") for s in cond.steps[: i + 1]])
            if key in seen:
                continue
            seen.add(key)
            steps += _steps_for(cond.steps[:i], step, src, size, rotation, profile, vp9_file, work, len(seen))
    return steps


def _steps_for(prefix: tuple[Step, ...], step: Step, src, size, rotation, profile, vp9_file, work, n) -> list:
    stream, shape = _frames_after(prefix, src, size, rotation, vp9_file, work)
    producer = _compile(stream.output("pipe:", **Y4M))
    raw = ffmpeg.input("pipe:", format="yuv4mpegpipe")
    label = "+".join(s.kind for s in (*prefix, step))
    if step.kind == "vp9":
        consumer = ffmpeg_cli._vp9_cmd(raw, step, profile, autorotate=False)
        last = len(consumer) - 1 - consumer[::-1].index("pipe:")  # the output (the input is a pipe: too)
        encode = FloorStep("vp9 encode", [*consumer[:last], str(vp9_file), *consumer[last + 1 :]], producer)
        return [encode, FloorStep("vp9 decode", _compile(ffmpeg.input(str(vp9_file)).output("-", format="null")))]
    if step.kind == "h264":
        return [FloorStep(f"h264 tail ({label})", ffmpeg_cli._h264_cmd(raw, step, profile, work / f"t{n}.mp4", False),
                          producer)]  # fmt: skip
    out, _ = ffmpeg_cli._filter(raw, step, shape, work)
    return [FloorStep(f"{step.kind} ({label})", _compile(out.output("-", format="null")), producer)]


def _frames_after(prefix, src, size, rotation, vp9_file, work):
    """An ffmpeg-python stream of the frames that reach the end of ``prefix``, and their size."""
    if prefix and prefix[0].kind == "vp9":
        stream, rest = ffmpeg.input(str(vp9_file))["v"], prefix[1:]
    else:
        stream, rest = ffmpeg_cli._normalized_input(str(src), size, rotation), prefix
    for step in rest:
        stream, size = ffmpeg_cli._filter(stream, step, size, work)
    return stream, size


def run_step(step: FloorStep) -> float:
    """CPU seconds of the step's own process (its producer's not counted)."""
    producer = None
    if step.producer:
        producer = subprocess.Popen(step.producer, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    consumer = subprocess.Popen(step.consumer, stdin=producer.stdout if producer else subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
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
