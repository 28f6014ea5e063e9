"""The error of a video whose bytes could not be fetched, and how a URI is quoted in one."""

from __future__ import annotations

from transforms.errors import VideoError


class SourceError(VideoError):
    """The video's bytes could not be fetched (missing file, a path outside the allowed roots, a bad URI)."""

    reason = "source_error"


def show(text: str, limit: int = 200) -> str:
    """``text`` quoted for an error message, cut to ``limit`` characters (a URI may be long)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
