"""The same conditions through the ffmpeg command line (ffmpeg-python + imageio-ffmpeg's static ffmpeg).

One command per condition: a VP9 storage encode piped into one ffmpeg whose filter graph holds the rest
of the chain. It is the cross-check of the in-memory engine and the baseline of ``lastmile bench``; it
needs temporary files (an MP4 cannot be read from or written to a pipe), which is part of its cost. Each step
adds its kind's CLI equivalent (:attr:`transforms.steps.kind.StepKind.cli`) to the chain.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from transforms.errors import InvalidVideo, SpecError
from transforms.ffmpeg_graph import ffmpeg_exe, normalized_input, source_geometry
from transforms.spec import Condition, Profile
from transforms.steps.kind import CliChain
from transforms.steps.registry import STEPS

__all__ = ["cli_kinds", "commands", "ffmpeg_exe", "run_condition"]

OUTPUT_NAME = "out.mp4"  # the variant, in the work folder


def cli_kinds() -> list[str]:
    """The step kinds the cross-check covers (those with a CLI equivalent), sorted."""
    return sorted(kind.name for kind in STEPS.kinds() if kind.cli is not None)


def run_condition(data: bytes, condition: Condition, profile: Profile) -> bytes:
    """Produce ``condition`` from ``data`` with the ffmpeg CLI; return the MP4 bytes."""
    if not condition.steps:
        return data
    with tempfile.TemporaryDirectory(prefix="lastmile-ffmpeg-") as tmp:
        work = Path(tmp)
        src = work / "input"
        src.write_bytes(data)
        return _run(src, condition, profile, work)


def commands(src: Path, condition: Condition, profile: Profile, work: Path) -> list[list[str]]:
    """The argument lists of the processes for ``condition`` (piped into each other in order)."""
    equivalents = [STEPS.get(s.kind).cli for s in condition.steps]
    if None in equivalents or any(cli.final for cli in equivalents[:-1]):
        raise SpecError(
            f"condition {condition.name!r}: the ffmpeg CLI cross-check covers {cli_kinds()} with H.264 last "
            "(the LastMile conditions and their sweeps); temporal edits and repost chains run in the engine only"
        )
    size, rotation = source_geometry(src)
    chain = CliChain(normalized_input(str(src), size, rotation), size, profile, work, work / OUTPUT_NAME)
    for step, cli in zip(condition.steps, equivalents, strict=True):
        chain = cli.apply(step, chain)
    return list(chain.commands)


def _run(src: Path, condition: Condition, profile: Profile, work: Path) -> bytes:
    cmds = commands(src, condition, profile, work)
    procs: list[subprocess.Popen[bytes]] = []
    for i, cmd in enumerate(cmds):
        stdin = procs[-1].stdout if procs else subprocess.DEVNULL
        stdout = subprocess.PIPE if i < len(cmds) - 1 else subprocess.DEVNULL
        procs.append(subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE))
        if i:
            procs[-2].stdout.close()  # the next process owns the pipe now
    errors = [(p.wait(), p.stderr.read().decode(errors="replace")[-2000:]) for p in reversed(procs)]
    for code, err in errors:
        if code != 0:
            raise InvalidVideo(f"ffmpeg failed ({code}): {err.strip()}")
    return (work / OUTPUT_NAME).read_bytes()
