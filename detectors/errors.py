"""Errors of detectors and their runtimes.

``RuntimeUnavailable`` means the scorer could not answer (retry later; never a verdict on the video);
``BadRequest`` means this input cannot be scored (an error for that video alone).
"""

from __future__ import annotations


class DetectorError(Exception):
    """Base class of detector-side errors."""


class CardError(DetectorError, ValueError):
    """A model card is malformed or does not match its ONNX graph."""


class RuntimeUnavailable(DetectorError):
    """The runtime cannot score right now (server down, timeout, overloaded): retry, never a verdict."""


class BadRequest(DetectorError):
    """The request itself is wrong for this model (shape, dtype): an error for that video."""
