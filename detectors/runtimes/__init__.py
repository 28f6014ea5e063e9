"""Runtimes that score sampled frames, one interface (:class:`~detectors.runtimes.base.Runtime`): embedded
onnxruntime in the calling process, or a Triton server over gRPC. :func:`make_runtime` picks one by name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from detectors.repository import Installed
    from detectors.runtimes.base import Runtime

RuntimeName = Literal["embedded", "triton"]


def make_runtime(
    inst: Installed, runtime: RuntimeName, triton_url: str = "127.0.0.1:8001", startup_timeout_s: float = 30.0
) -> Runtime:
    """The runtime ``runtime`` for one installed detector (the embedded one runs single-threaded)."""
    if runtime == "embedded":
        from detectors.runtimes.embedded import EmbeddedRuntime

        return EmbeddedRuntime(inst.model_path, inst.card, intra_op_threads=1)
    from detectors.runtimes.triton import TritonRuntime

    return TritonRuntime(inst.card, url=triton_url, startup_timeout_s=startup_timeout_s)
