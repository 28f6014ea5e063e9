"""Errors of detectors, their runtimes and their servers: one tree, caught by what the caller can do about it.

```
DetectorError
├── CardError            a model card is malformed or does not fit its ONNX graph (also a ValueError)
│   ├── CardFileError    the card's file cannot be read as written (also a transforms ConfigError)
│   └── UnknownDetector  a detector name no repository holds (also a transforms ConfigError)
├── BadRequest           this input cannot be scored by this model (shape, dtype): an error for that video alone
│   └── NonFiniteScore   the model answered NaN or an infinity for it: no score, an error for that video
├── UnparsedReply        a chat detector's reply that says no verdict (a refusal, prose, a rating out of range):
│                        an outcome of its own, counted, never a verdict and never an infrastructure error
├── RuntimeUnavailable   the scorer could not answer (server down, timeout, overloaded): retry, never a verdict
└── TritonNotInstalled   tritonclient, the bundled tritonserver or TensorRT is not installed here (a RuntimeError)
```
"""

from __future__ import annotations

from transforms.support.config_errors import ConfigError


class DetectorError(Exception):
    """Base class of detector-side errors."""


class CardError(DetectorError, ValueError):
    """A model card is malformed or does not match its ONNX graph."""


class UnknownDetector(CardError, ConfigError):
    """A detector name that no repository holds: the configuration's fault (exit status 2, as an unknown
    condition)."""


class CardFileError(CardError, ConfigError):
    """A model card file that cannot be read as written (the CLI prints it in one line, exit status 2)."""


class RuntimeUnavailable(DetectorError):
    """The runtime cannot score right now (server down, timeout, overloaded): retry, never a verdict."""


class BadRequest(DetectorError):
    """The request itself is wrong for this model (shape, dtype): an error for that video."""


class NonFiniteScore(BadRequest):
    """The model scored the input NaN or an infinity: no score (a verdict or an AUC cannot be made of it), an
    error for that video alone."""


class UnparsedReply(DetectorError):
    """A chat detector answered, and its reply cannot be read as the prompt's format asks (the reason says why):
    its rows are ``error_kind="reply"``, counted per detector and condition, in no metric's numerator. It carries
    the tokens the reply used (they were paid for)."""

    def __init__(self, reason: str, tokens_in: int | None = None, tokens_out: int | None = None, cached: bool = False):
        super().__init__(reason)
        self.tokens_in, self.tokens_out, self.cached = tokens_in, tokens_out, cached


class TritonNotInstalled(DetectorError, RuntimeError):
    """tritonclient (extra ``triton-local``), the bundled tritonserver (nvidia-pytriton) or TensorRT is not
    installed here."""
