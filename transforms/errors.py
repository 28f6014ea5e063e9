"""The errors a video can cause. Each is about *this input*, never about the service.

``VideoError`` is the root; the gateway sends any of them to the dead-letter path with the class name
as the reason, and keeps going.
"""

from __future__ import annotations

from transforms.support.config_errors import ConfigError


class VideoError(Exception):
    """Base class for every problem with one input video."""

    reason = "video_error"


class InvalidVideo(VideoError):
    """The bytes are not a decodable video: empty, truncated, corrupt or garbage."""

    reason = "invalid_video"


class UnsupportedVideo(VideoError):
    """The bytes are a valid file, but not one we transform: a still image, audio only, an odd format."""

    reason = "unsupported_video"


class LimitExceeded(VideoError):
    """The input is larger than a configured limit (bytes, pixels, duration or frames)."""

    reason = "limit_exceeded"


class SpecError(ConfigError):
    """A condition or profile specification is malformed (a configuration error, not a video error)."""
