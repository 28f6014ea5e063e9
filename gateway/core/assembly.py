"""Wiring: a :class:`~gateway.core.pipeline.Pipeline` from a configuration (conditions, profile, detectors, runtime)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.core.config import PipelineSettings
from transforms.engine import Engine

if TYPE_CHECKING:
    from detectors.repository import Installed
    from detectors.runtimes.base import Runtime
    from gateway.core.pipeline import Pipeline


def build_pipeline(cfg: PipelineSettings) -> Pipeline:
    """The pipeline a replay or a gateway runs: conditions, encoder profile, detectors and their runtime."""
    from detectors.repository import get_detectors
    from gateway.core.pipeline import Detector, Pipeline

    conditions, profile = cfg.resolve_conditions()
    engine = Engine(profile.with_determinism(cfg.deterministic), cfg.limits)
    detectors = [Detector(inst, make_runtime(inst, cfg)) for inst in get_detectors(cfg.detectors, cfg.repo)]
    return Pipeline(engine, conditions, detectors)


def make_runtime(inst: Installed, cfg: PipelineSettings) -> Runtime:
    from detectors.runtimes import make_runtime as make

    return make(inst, cfg.runtime, cfg.triton_url)
