"""Encoder set-up read from the profile (no constants buried in the engine): threads, the H.264 encoder (NVENC
when it really opens), reproducible x264. Each encoding step kind builds its own options on these
(:mod:`transforms.steps`)."""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import av
import av.logging

from transforms.profile import Profile


def threads_option(profile: Profile) -> dict[str, str]:
    """The generic ``threads`` codec option. Passed as an option, not only as ``thread_count``: measured
    here, libx264 opened by PyAV with ``thread_count = 1`` alone still ran its lookahead threaded and gave
    different bytes from run to run at preset medium; with the option it is byte-stable."""
    threads = profile.encoder_threads()
    return {"threads": str(threads)} if threads else {}


def h264_encoder_name(profile: Profile) -> str:
    """The H.264 encoder the profile asks for; ``auto`` means NVENC when it really opens, else libx264."""
    if profile.h264_encoder == "auto":
        return "h264_nvenc" if nvenc_available() else "libx264"
    return profile.h264_encoder


def x264_reproducible_options() -> dict[str, str]:
    """Options under which libx264 gives the same bytes on every run on this machine.

    Measured here: the x264 in PyAV's wheel (core 165) gives different bytes from run to run on AVX-512
    CPUs (its AVX-512 macroblock-tree path), even on one thread; capped at AVX2 it is byte-stable at the
    same speed. AVX-512 CPUs all have AVX2, so the cap never asks for an instruction the CPU lacks.
    """
    opts = {"threads": "1"}
    if _cpu_has_avx512():
        opts["x264-params"] = "asm=AVX2"
    return opts


@lru_cache(maxsize=1)
def _cpu_has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def nvenc_available() -> bool:
    """True when an NVENC H.264 encoder can actually be opened (a GPU with an NVENC engine, and its driver)."""
    return nvenc_unavailable_reason() is None


@lru_cache(maxsize=1)
def nvenc_unavailable_reason() -> str | None:
    """Why NVENC cannot be used here (FFmpeg's own words), or None when it opens. Hopper data-centre GPUs
    (H100, H200) have no NVENC engine: FFmpeg answers "OpenEncodeSessionEx failed: unsupported device"."""
    if "h264_nvenc" not in av.codecs_available:
        return "h264_nvenc is not in PyAV's FFmpeg"
    level = av.logging.get_level()
    av.logging.set_level(av.logging.ERROR)  # FFmpeg logs its own reason; PyAV's exception is generic
    try:
        with av.logging.Capture() as logs:
            enc = av.CodecContext.create("h264_nvenc", "w")
            enc.width, enc.height, enc.pix_fmt, enc.time_base = 64, 64, "yuv420p", Fraction(1, 25)
            enc.open()
    except av.error.FFmpegError as exc:
        said = "; ".join(message.strip() for _, _, message in logs if message.strip())
        return f"h264_nvenc does not open: {said or exc}"
    finally:
        av.logging.set_level(level)
    return None
