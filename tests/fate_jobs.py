"""A worker entry for the fates test (importable by spawned workers): the real worker, with its real pipeline and
runtime, and one injected failure per video, named by the first part of its id:

``killed``: the worker SIGKILLs itself (what the OOM killer does); ``slow``: it overruns the deadline;
``raises``: the runtime raises an unexpected exception; ``down``: the runtime raises :class:`RuntimeUnavailable`
on the video's first run only (a marker in ``$LASTMILE_FATES_DIR`` remembers it); any other id runs as it is.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from detectors.errors import RuntimeUnavailable
from gateway.core.config import PipelineSettings
from gateway.scoring import worker
from gateway.scoring.assembly import build_pipeline
from gateway.scoring.worker import Answer, Entry, FetchRules, VideoRequest

_STATE: dict = {}


class _Faulty:
    """A real runtime that raises the current video's injected error instead of scoring."""

    def __init__(self, runtime) -> None:
        self.runtime = runtime

    def __getattr__(self, name: str):
        return getattr(self.runtime, name)

    def score(self, frames):
        fault = _STATE.get("fault")
        if fault == "raises":
            raise ZeroDivisionError("injected: a bug in scoring")
        if fault == "down":
            raise RuntimeUnavailable("injected: the scorer is down")
        return self.runtime.score(frames)


def init(settings_json: str, rules_json: str) -> None:
    pipeline = build_pipeline(PipelineSettings.model_validate_json(settings_json))
    for det in pipeline.detectors:
        det.runtime = _Faulty(det.runtime)
    _STATE.update(pipeline=pipeline, rules=FetchRules.model_validate_json(rules_json))


def run(request: VideoRequest) -> Answer:
    fault = request.video_id.split("-")[0]
    if fault == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    if fault == "slow":
        time.sleep(3600)  # killed at the deadline
    if fault == "down":
        marker = Path(os.environ["LASTMILE_FATES_DIR"]) / request.video_id
        fault = "down" if not marker.exists() else "none"
        marker.touch()
    _STATE["fault"] = fault
    return worker.handle(_STATE["pipeline"], _STATE["rules"], request)


ENTRY = Entry(run, init)
