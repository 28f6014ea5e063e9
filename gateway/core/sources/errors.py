"""The error of a video whose bytes could not be fetched, and how a URI is quoted in one."""

from __future__ import annotations

from transforms.errors import VideoError


class SourceError(VideoError):
    """The video's bytes could not be fetched (missing file, a path outside the allowed roots, a bad URI)."""

    reason = "source_error"


class ContentMismatch(SourceError):
    """The bytes read are not the video its sender named: their sha256 differs from the one it gave (the file was
    changed or corrupted after it was hashed, or the URI names another video). ``digest``: the bytes' sha256."""

    reason = "content_mismatch"

    def __init__(self, digest: str, expected: str) -> None:
        super().__init__(f"the bytes read have sha256 {digest}, not the {expected} their sender gave")
        self.digest, self.expected = digest, expected


class SourceUnavailable(Exception):
    """The store holding the video did not answer (throttled, timed out, unreachable): retried with the gateway's
    backoff, never a verdict on the video."""


def show(text: str, limit: int = 200) -> str:
    """``text`` quoted for an error message, cut to ``limit`` characters (a URI may be long)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")
