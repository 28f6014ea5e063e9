"""The runtime interface over Triton's gRPC API (any Triton: the bundled local one or a production server).

It checks readiness and the served model's metadata against the card at start, batches up to the served
``max_batch_size``, sets timeouts, retries transient errors with backoff, and tells "unavailable" (retry,
never a verdict) from "bad request" (this video's error): :func:`classify_error` is that one mapping.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from detectors.card import ModelCard
from detectors.errors import BadRequest, CardError, DetectorError, RuntimeUnavailable, TritonNotInstalled
from detectors.runtimes.base import RuntimeStats, answers, infer_with_retries, score_in_batches
from detectors.serving.config import DTYPES


def classify_error(name: str, exc: Exception, model_ready: Callable[[], bool] = lambda: False) -> DetectorError:
    """A tritonclient error as ours. INVALID_ARGUMENT is this request's fault (:class:`BadRequest`). INTERNAL
    while the model is ready is too: the python backend reports a failure on one input that way, and retrying
    it as "unavailable" never ended. Anything else (UNAVAILABLE, DEADLINE_EXCEEDED, a restarting server) is
    :class:`RuntimeUnavailable`: retry, never a verdict."""
    status = str(getattr(exc, "status", lambda: "")() or "").upper()
    message = getattr(exc, "message", lambda: str(exc))()
    if "INVALID_ARG" in status:
        return BadRequest(f"{name}: Triton rejected the request: {message}")
    if "INTERNAL" in status and model_ready():
        return BadRequest(f"{name}: Triton failed on this input while the model is ready: {message}")
    return RuntimeUnavailable(f"{name}: Triton could not answer: {message}")


def require_client() -> None:
    """Raise :class:`TritonNotInstalled` where tritonclient's gRPC client (extra ``triton-local``) cannot be
    imported: checked before any worker starts, since a package missing is no outage that waiting would end."""
    import importlib

    try:
        importlib.import_module("tritonclient.grpc")  # imported, not only found: grpcio is an extra of its own
    except ImportError as exc:
        raise TritonNotInstalled(
            f"the triton runtime and grpc:// remote detectors need tritonclient[grpc] ({exc}): "
            "pip install 'lastmile-gateway[triton-local]' (or '.[triton-local]' in a checkout)"
        ) from None


class TritonRuntime:
    """The runtime interface over Triton's gRPC API."""

    name = "triton"

    def __init__(
        self,
        card: ModelCard,
        url: str = "127.0.0.1:8001",
        *,
        timeout_s: float = 30.0,
        retries: int = 6,
        backoff_s: float = 0.25,
        max_batch: int | None = None,
        startup_timeout_s: float = 30.0,
    ) -> None:
        import tritonclient.grpc as grpcclient

        self.card, self.url, self.timeout_s = card, url, timeout_s
        self.retries, self.backoff_s = retries, backoff_s
        self.client = grpcclient.InferenceServerClient(url)
        self.stats = RuntimeStats()
        self._grpc = grpcclient
        self.max_batch = self._check_model(startup_timeout_s, max_batch)

    def _check_model(self, timeout_s: float, max_batch: int | None) -> int:
        """Fail fast when the server's model does not match the card (names, dtype, shape)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self.client.is_model_ready(self.card.name):
                    break
                problem = f"model {self.card.name!r} is not ready on Triton at {self.url}"
            except Exception as exc:  # tritonclient raises InferenceServerException for a down server
                problem = f"Triton at {self.url} is unavailable: {exc}"
            if time.monotonic() > deadline:
                raise RuntimeUnavailable(problem)
            time.sleep(0.25)
        meta = self.client.get_model_metadata(self.card.name, as_json=True)
        config = self.client.get_model_config(self.card.name, as_json=True)["config"]
        inputs = {i["name"]: i for i in meta["inputs"]}
        want = [str(v) for v in self.card.input_shape(1)[1:]]
        if self.card.input.name not in inputs:
            raise CardError(
                f"{self.card.name}: the card's input {self.card.input.name!r} is not served by Triton "
                f"(served inputs: {sorted(inputs)})"
            )
        served = inputs[self.card.input.name]
        if served["datatype"] != DTYPES[self.card.input.dtype][1]:
            raise CardError(
                f"{self.card.name}: the card says {self.card.input.dtype}, Triton serves {served['datatype']}"
            )
        if [str(v) for v in served["shape"][1:]] != want:
            raise CardError(
                f"{self.card.name}: the card's frames are [N, {', '.join(want)}], Triton serves {served['shape']}"
            )
        if self.card.output.name not in {o["name"] for o in meta["outputs"]}:
            raise CardError(f"{self.card.name}: the card's output {self.card.output.name!r} is not served by Triton")
        served_batch = int(config.get("max_batch_size", 0) or 1)
        return min(max_batch or served_batch, served_batch)

    def score(self, frames: np.ndarray) -> np.ndarray:
        return score_in_batches(self.card, frames, self.max_batch, self._infer, self.stats)

    def _model_ready(self) -> bool:
        return answers(lambda: self.client.is_model_ready(self.card.name))

    def _infer(self, chunk: np.ndarray) -> np.ndarray:
        from tritonclient.utils import InferenceServerException

        grpc = self._grpc
        inp = grpc.InferInput(self.card.input.name, list(chunk.shape), DTYPES[self.card.input.dtype][1])
        inp.set_data_from_numpy(chunk)
        wanted = [grpc.InferRequestedOutput(self.card.output.name)]

        def call() -> np.ndarray:
            result = self.client.infer(self.card.name, [inp], outputs=wanted, client_timeout=self.timeout_s)
            return result.as_numpy(self.card.output.name)

        return infer_with_retries(
            call,
            len(chunk),
            lambda exc: classify_error(self.card.name, exc, self._model_ready),
            InferenceServerException,
            self.retries,
            self.backoff_s,
            f"{self.card.name}: Triton at {self.url}",
        )
