"""Wiring: a :class:`~gateway.core.pipeline.Pipeline` from a configuration (conditions, profile, detectors, runtime)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.core.config import PipelineSettings
from transforms.engine import Engine

if TYPE_CHECKING:
    from gateway.core.pipeline import Pipeline


def build_pipeline(cfg: PipelineSettings, runtimes: bool = True) -> Pipeline:
    """The pipeline a replay or a gateway runs: conditions, encoder profile, detectors and their runtime.

    ``runtimes=False`` builds it without connecting to any runtime: what a parent process needs to write the
    rows of a video its workers could not score (it must start, and say why, while a scorer is down).
    """
    from detectors.repository import get_detectors
    from gateway.core.pipeline import Detector, Pipeline

    conditions, profile = cfg.resolve_conditions()
    engine = Engine(profile.with_determinism(cfg.deterministic), cfg.limits)
    detectors = [
        Detector(inst, _runtime(inst, cfg) if runtimes else None, "remote" if inst.card.remote else cfg.runtime)
        for inst in get_detectors(cfg.detectors, cfg.repo)
    ]
    return Pipeline(engine, conditions, detectors)


def _runtime(inst, cfg: PipelineSettings):
    from detectors.runtimes import make_runtime

    return make_runtime(inst, cfg.runtime, cfg.triton_url, cfg.triton_startup_timeout_s)
