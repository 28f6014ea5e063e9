"""Wiring: a :class:`~gateway.scoring.pipeline.Pipeline` from a configuration (conditions, profile, detectors,
runtime)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.core.config import PipelineSettings
from transforms.engine import Engine

if TYPE_CHECKING:
    from gateway.scoring.pipeline import Pipeline


def build_pipeline(cfg: PipelineSettings, runtimes: bool = True) -> Pipeline:
    """The pipeline a replay or a gateway runs: conditions, encoder profile, detectors and their runtime.

    ``runtimes=False`` builds it without connecting to any runtime: what a parent process needs to write the
    rows of a video its workers could not score (it must start, and say why, while a scorer is down). Asked for
    a GPU execution provider (``onnxruntime.provider``), it first checks that every embedded detector's graph runs
    there, so a start-up that cannot use the GPU fails at once, in one line
    (:class:`~detectors.runtimes.providers.ProviderUnavailable`), rather than in each worker; so does one whose
    Triton or remote detectors lack tritonclient (:class:`~detectors.errors.TritonNotInstalled`).
    """
    from detectors.repository import get_detectors
    from detectors.runtimes import check_servable
    from detectors.runtimes.providers import check_placement
    from detectors.runtimes.triton import require_client
    from gateway.scoring.pipeline import Detector, Pipeline

    conditions, profile = cfg.resolve_conditions()
    engine = Engine(profile.with_determinism(cfg.deterministic), cfg.limits)
    installed = get_detectors(cfg.detectors, cfg.repo)
    for inst in installed:
        check_servable(inst, cfg.runtime)
    embedded = {i.key: i.model_path for i in installed if not i.card.served_elsewhere and cfg.runtime == "embedded"}
    placed = check_placement(embedded, cfg.onnxruntime) if not runtimes else {}
    if not runtimes and any(_needs_grpc(i, cfg.runtime) for i in installed):
        require_client()
    detectors = []
    for inst in installed:
        runtime = _runtime(inst, cfg) if runtimes else None
        name = "chat" if inst.card.chat else "remote" if inst.card.remote else cfg.runtime
        # an embedded detector's placement, checked here; any other runtime says where it scores
        where = placed[inst.key].label if inst.key in placed else None
        detectors.append(Detector(inst, runtime, name, where))
    return Pipeline(engine, conditions, detectors)


def _needs_grpc(inst, runtime: str) -> bool:
    """Whether this detector is scored through tritonclient's gRPC client (Triton, or a grpc:// remote server;
    an http(s):// remote one needs only the standard library)."""
    remote = inst.card.remote
    return remote.endpoint.startswith("grpc://") if remote else runtime == "triton"


def _runtime(inst, cfg: PipelineSettings):
    from detectors.runtimes import make_runtime

    return make_runtime(
        inst, cfg.runtime, cfg.triton_url, cfg.triton_startup_timeout_s, cfg.onnxruntime, chat_cache=cfg.chat_cache
    )
