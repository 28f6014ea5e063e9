"""Encoder and decoder set-up for the steps, read from the profile (no constants buried in the engine)."""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import av
import av.logging

from transforms.spec import H264Step, Profile, Vp9Step


def vp9_encoder(
    step: Vp9Step, profile: Profile, width: int, height: int, time_base: Fraction, rate: Fraction
) -> av.video.codeccontext.VideoCodecContext:
    """A libvpx-vp9 encoder at constant quality (``crf`` with ``b:v 0``), configured by ``profile``."""
    enc = av.CodecContext.create("libvpx-vp9", "w")
    enc.width, enc.height, enc.pix_fmt = width, height, "yuv420p"
    enc.time_base, enc.framerate = time_base, rate
    enc.bit_rate = step.bitrate
    enc.thread_count = profile.encoder_threads()
    enc.options = vp9_options(step, profile)
    return enc


def vp9_options(step: Vp9Step, profile: Profile) -> dict[str, str]:
    """libvpx-vp9 private options for ``step`` under ``profile`` (shared with the ffmpeg CLI backend)."""
    return {
        "crf": str(step.crf),
        "deadline": profile.vp9_deadline,
        "cpu-used": str(profile.vp9_cpu_used),
        "row-mt": "0" if profile.deterministic else "1",
        **threads_option(profile),
    }


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


def h264_options(step: H264Step, profile: Profile, encoder: str) -> dict[str, str]:
    """Encoder options for the final H.264 encode (libx264 CRF, or NVENC constant-QP-like CQ)."""
    if encoder == "h264_nvenc":
        return {"rc": "vbr", "cq": str(step.crf), "preset": "p4", "profile": step.profile}
    opts = {
        "crf": str(step.crf),
        "preset": profile.x264_preset,
        "profile": step.profile,
        **threads_option(profile),
    }
    if profile.deterministic:
        opts.update(x264_reproducible_options())
    return opts


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
