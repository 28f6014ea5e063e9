"""Where a report's numbers come from: the run's rows and ``run.json``, the corpus notice that every part of a
report on the proxy corpus carries, and what every kind of report states of its run beside its numbers
(detectors with their versions and runtimes, encoder profiles, spec and model hashes, the manifest, the gateway
versions, seeds, the failure banner, thresholds and bootstrap)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from detectors.proxy.corpus import USER_ANCHORS
from gateway import VERSION
from gateway.batch.results import RESULTS, ResultsError, read_results
from gateway.core.messages import ScoreRow
from gateway.evaluation.caveats import failure_banner, seeds
from gateway.evaluation.paired import Evaluation, by_version
from gateway.evaluation.reals import RealsEvaluation
from gateway.evaluation.thresholds import thresholds_sentence

PROXY_WARNING = (
    "This run uses lastmile-gateway's self-made proxy corpus: synthetic camera-like scenes and pseudo-generators. "
    "It is a proxy for AI-generated video, not AI-generated video; its numbers show how detectors respond to "
    "dissemination on that proxy, not how they perform on real generators."
)


USER_ANCHORS_WARNING = (
    "This run uses lastmile-gateway's proxy corpus built on your own videos: they are its real anchors, and its "
    "generated videos are pseudo-generated counterparts rendered from each anchor's first frame. It is a proxy for "
    "AI-generated video, not AI-generated video; its numbers show how detectors respond to dissemination on that "
    "proxy, not how they perform on real generators."
)


def read_run(run_dir: Path) -> tuple[list[ScoreRow], dict]:
    """A run's rows and its ``run.json`` (empty where there is none); :class:`ResultsError` where either cannot be
    read."""
    meta = run_dir / "run.json"
    try:
        info = json.loads(meta.read_text()) if meta.exists() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{meta} is not a run's JSON: {exc}") from None
    if not isinstance(info, dict):
        raise ResultsError(f"{meta} is not a run's JSON: an object was expected")
    return read_results(run_dir / RESULTS), info


def in_run_order(conditions: list[str], info: dict) -> list[str]:
    """``conditions`` in the order ``run.json`` lists them (a sweep's values as listed, mildest first), any it
    does not list after them."""
    order = info.get("conditions") or []
    return [c for c in order if c in conditions] + [c for c in conditions if c not in order]


def corpus_notice(ctx: dict) -> str | None:
    """What every part of a report on the proxy corpus says of it (``ctx``: :func:`provenance`'s); None for
    another corpus."""
    if not ctx["proxy"]:
        return None
    return USER_ANCHORS_WARNING if ctx["corpus"].get("real_anchors") == USER_ANCHORS else PROXY_WARNING


def provenance(rows: list[ScoreRow], info: dict) -> dict:
    """What a report states of its run's origin, from the rows' own provenance and ``run.json``."""
    corpus = info.get("corpus") or {}
    return {
        "proxy": bool(corpus.get("notice", "")) and "PROXY" in corpus.get("notice", ""),
        "corpus": corpus,
        "manifest": (info.get("config") or {}).get("manifest") or "not recorded",
        "rows": len(rows),
        "detectors": sorted({f"{r.detector} {r.detector_version} ({r.runtime})" for r in rows}),
        "profiles": sorted({r.profile for r in rows if r.profile}),
        "spec_hashes": sorted({(r.condition, r.spec_hash) for r in rows if r.spec_hash}),
        "model_hashes": sorted(
            {(f"{r.detector}@{r.detector_version}", r.model_sha256) for r in rows if r.model_sha256}
        ),
        "manifest_sha256": info.get("manifest_sha256") or "not recorded",
        "gateway_version": {"replay": info.get("gateway_version") or "not recorded", "report": VERSION},
        "route": info.get("route") or "not recorded",
    }


def run_context(ev: Evaluation | RealsEvaluation, rows: list[ScoreRow], info: dict, interval: str) -> dict:
    """:func:`provenance` with what every report states beside it: seeds, anchors and videos, the failure banner,
    the thresholds and the bootstrap (its ``interval`` described)."""
    ctx = provenance(rows, info)
    recalls = "RealR" if isinstance(ev, RealsEvaluation) else "FakeR/RealR"
    seeded = seeds(ev, ctx["corpus"])
    # in the order report.json has always given them
    stated = {
        "proxy": ctx["proxy"],
        "corpus": ctx["corpus"],
        "corpus_seed": seeded["corpus_text"],
        "seeds": seeded,
        "manifest": ctx["manifest"],
        "anchors": ev.anchors,
        "videos": ev.videos,
        "rows": ctx["rows"],
        "failures": failure_banner(by_version(rows), info.get("conditions") or ev.conditions, recalls),
        "thresholds": thresholds_sentence({c.detector: c.threshold for c in ev.cells}, ev.calibrated),
        "bootstrap": {"replicates": ev.replicates, "seed": ev.seed, "interval": interval},
        "calibrated": ev.calibrated,
    }
    return stated | ctx


def report_json(ev: Evaluation | RealsEvaluation, ctx: dict) -> dict:
    """What every report.json opens with: the banner, findings and cautions (``ctx``'s), the context with hashes
    as objects, the corpus notice and the cells."""
    hashes = [{"condition": c, "spec_hash": h} for c, h in ctx["spec_hashes"]]
    models = [{"detector": d, "model_sha256": h} for d, h in ctx["model_hashes"]]
    context = {k: v for k, v in ctx.items() if k not in ("failures", "findings", "warnings")}
    return {
        "failures": ctx["failures"],
        "key_findings": [dataclasses.asdict(f) for f in ctx["findings"]],
        "warnings": ctx["warnings"],
        "context": {**context, "spec_hashes": hashes, "model_hashes": models},
        "notice": corpus_notice(ctx),
        "cells": [dataclasses.asdict(c) for c in ev.cells],
    }
