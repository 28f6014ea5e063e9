"""The ``remote`` runtime: any server that speaks the Open Inference Protocol (KServe v2: Triton, KServe,
Seldon MLServer), over HTTP/REST (JSON, the protocol's own encoding; standard library only) or gRPC (the
protocol's ``inference.GRPCInferenceService``, through tritonclient's stubs).

At start it waits for the model to be ready and checks its metadata against the card (input name, datatype,
shape; output name); it batches up to the card's ``remote.max_batch``; it retries unavailability with the
Triton runtime's rules (:func:`~detectors.runtimes.triton.classify_error` for gRPC, the same split by HTTP
status) and reports ``runtime: remote`` with the endpoint. The served model takes the gateway's contract (uint8
``[N, T, H, W, 3]`` frames, one score per video): serve the composed graph ``lastmile detectors add`` writes.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import numpy as np

from detectors.card import ModelCard
from detectors.errors import BadRequest, CardError, RuntimeUnavailable
from detectors.http import REPLY_BYTES, ReplyTooLarge, read_bounded
from detectors.runtimes.base import RuntimeStats, answers, infer_with_retries, score_in_batches

DATATYPES = {"uint8": "UINT8", "float32": "FP32"}
__all__ = ["REPLY_BYTES", "GrpcOIP", "HttpOIP", "RemoteRuntime", "ReplyTooLarge", "metadata_problems"]


class HttpOIP:
    """KServe v2 over HTTP/REST with JSON tensors."""

    def __init__(self, endpoint: str, model: str, version: str, timeout_s: float) -> None:
        path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "")
        self.base, self.timeout_s = endpoint.rstrip("/") + path, timeout_s

    def _call(self, suffix: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + suffix, data=data, headers={"Content-Type": "application/json"})
        return json.loads(read_bounded(req, self.timeout_s) or b"{}")

    def ready(self) -> bool:
        self._call("/ready")
        return True

    def metadata(self) -> dict:
        return self._call("")

    def infer(self, name: str, chunk: np.ndarray, datatype: str, output: str) -> np.ndarray:
        body = {
            "inputs": [
                {"name": name, "shape": list(chunk.shape), "datatype": datatype, "data": chunk.ravel().tolist()}
            ],
            "outputs": [{"name": output}],
        }
        out = next(o for o in self._call("/infer", body)["outputs"] if o["name"] == output)
        return np.asarray(out["data"], dtype=np.float64).reshape(out["shape"])

    def classify(self, exc: Exception, what: str) -> Exception:
        """400/404-with-a-ready-model/500-with-a-ready-model: this request's fault; anything else: unavailable."""
        code = exc.code if isinstance(exc, urllib.error.HTTPError) else None
        if code == 400 or (code in (404, 500) and answers(self.ready)):
            detail = exc.read(300).decode(errors="replace") if isinstance(exc, urllib.error.HTTPError) else ""
            return BadRequest(f"{what}: the server rejected the request ({code}): {detail}")
        return RuntimeUnavailable(f"{what}: the server could not answer: {exc}")


class GrpcOIP:
    """KServe v2 over gRPC (``inference.GRPCInferenceService``)."""

    def __init__(self, endpoint: str, model: str, version: str, timeout_s: float) -> None:
        import tritonclient.grpc as grpcclient

        self.grpc, self.model, self.version, self.timeout_s = grpcclient, model, version, timeout_s
        self.client = grpcclient.InferenceServerClient(endpoint.removeprefix("grpc://"))

    def ready(self) -> bool:
        return bool(self.client.is_model_ready(self.model, self.version))

    def metadata(self) -> dict:
        return self.client.get_model_metadata(self.model, self.version, as_json=True)

    def infer(self, name: str, chunk: np.ndarray, datatype: str, output: str) -> np.ndarray:
        inp = self.grpc.InferInput(name, list(chunk.shape), datatype)
        inp.set_data_from_numpy(chunk)
        wanted = [self.grpc.InferRequestedOutput(output)]
        result = self.client.infer(
            self.model, [inp], model_version=self.version, outputs=wanted, client_timeout=self.timeout_s
        )
        return np.asarray(result.as_numpy(output), dtype=np.float64)

    def classify(self, exc: Exception, what: str) -> Exception:
        from detectors.runtimes.triton import classify_error

        return classify_error(what, exc, lambda: answers(self.ready))


class RemoteRuntime:
    name = "remote"

    def __init__(self, card: ModelCard, *, retries: int = 6, backoff_s: float = 0.25, startup_timeout_s: float = 30.0):
        if card.remote is None:
            raise CardError(f"{card.name}: the remote runtime needs a card with a remote: section")
        spec = card.remote
        self.card, self.endpoint, self.retries, self.backoff_s = card, spec.endpoint, retries, backoff_s
        proto = GrpcOIP if spec.endpoint.startswith("grpc://") else HttpOIP
        self.client = proto(spec.endpoint, spec.model, spec.version, spec.timeout_s)
        self.stats = RuntimeStats()
        self.max_batch = spec.max_batch
        self._check(startup_timeout_s)

    def _check(self, timeout_s: float) -> None:
        """Wait for the model; refuse it, naming each difference, if its metadata disagrees with the card."""
        deadline = time.monotonic() + timeout_s
        while not answers(self.client.ready):
            if time.monotonic() > deadline:
                raise RuntimeUnavailable(
                    f"{self.card.name}: model {self.card.remote.model!r} is not ready at {self.endpoint}"
                )
            time.sleep(0.25)
        meta = self.client.metadata()
        problems = metadata_problems(self.card, meta)
        if problems:
            raise CardError(
                f"{self.card.name}: the model served at {self.endpoint} disagrees with its card: " + "; ".join(problems)
            )

    def score(self, frames: np.ndarray) -> np.ndarray:
        return score_in_batches(self.card, frames, self.max_batch, self._infer, self.stats)

    def _infer(self, chunk: np.ndarray) -> np.ndarray:
        i, o = self.card.input, self.card.output
        return infer_with_retries(
            lambda: self.client.infer(i.name, chunk, DATATYPES[i.dtype], o.name),
            len(chunk),
            lambda exc: self.client.classify(exc, self.card.name),
            Exception,  # the protocol client's own errors: classified, then retried or raised
            self.retries,
            self.backoff_s,
            f"{self.card.name}: {self.endpoint}",
        )


def metadata_problems(card: ModelCard, meta: dict) -> list[str]:
    """Every difference between the served model's metadata and the card."""
    from detectors.compose import input_dims

    i, o = card.input, card.output
    inputs = {x["name"]: x for x in meta.get("inputs", [])}
    out = []
    if i.name not in inputs:
        return [f"the card's input {i.name!r} is not served (served inputs: {sorted(inputs)})"]
    served = inputs[i.name]
    if served["datatype"] != DATATYPES[i.dtype]:
        out.append(f"input {i.name!r}: the card says {i.dtype} ({DATATYPES[i.dtype]}), the server {served['datatype']}")
    want = input_dims(i, card.sampling)
    shape = [int(d) for d in served["shape"]]
    if len(shape) != len(want):
        out.append(f"input {i.name!r}: the card's layout {i.layout} is rank {len(want)}, the server's shape {shape}")
    else:
        for axis, (s, w) in enumerate(zip(shape, want, strict=True)):
            if s >= 0 and w is not None and s != w:
                out.append(f"input {i.name!r} axis {axis}: the card implies {w}, the server serves {s}")
    if o.name not in {x["name"] for x in meta.get("outputs", [])}:
        out.append(f"the card's output {o.name!r} is not served")
    return out
