"""``lastmile demo``: synthesise a small proxy corpus, replay all six conditions through the reference
detectors, write the report and print its main table. Needs no torch: the detectors are committed."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from detectors.proxy.corpus import CorpusConfig, synthesize
from detectors.repository import get_detectors, list_versions
from gateway.batch.replay import ReplayConfig, replay
from gateway.evaluation.provenance import PROXY_WARNING
from gateway.evaluation.report import build_report, evaluate_run
from gateway.evaluation.tables import main_table

DEMO_FLIPS = 1  # flipped videos shown with their strip per detector, condition and kind (each is rendered again:
# about a third of a second per video on 2 cores; the report's own default is 3)
DEMO_SEED = 4242  # held out: the reference detectors were trained and calibrated on seed 1000
DEMO_SWEEPS = {  # `lastmile demo --sweeps`: a severity sweep and a repost chain, as a conditions file holds them
    "sweeps": [{"base": "spatial", "step": "scale", "param": "factor", "values": [0.75, 0.5, 0.33, 0.25]}],
    "reposts": [{"base": "full", "hops": 2}],
}


def run_demo(
    out: Path,
    anchors: int = 12,
    profile: str = "fidelity",
    workers: int | None = None,
    echo: Callable[[str], None] = print,
    sweeps: bool = False,
    flips: int = DEMO_FLIPS,
    versions: bool = False,
) -> dict:
    """Corpus, replay, report; with ``versions``, every further version of a reference detector too (the augmented
    npr and spectral), each compared with its default version (champion against challenger)."""
    t0 = time.perf_counter()
    if out.exists():
        shutil.rmtree(out)
    corpus_dir, run_dir = out / "corpus", out / "run"
    echo(f"1/3 synthesising a proxy corpus: {anchors} anchors x (1 real + 5 pseudo-generated), seed {DEMO_SEED}")
    manifest = synthesize(CorpusConfig(anchors=anchors, seed=DEMO_SEED), corpus_dir)
    t1 = time.perf_counter()
    pairs = version_pairs() if versions else []
    # every default version, then each further one: "all" alone when there is none
    keys = [*(i.key for i in get_detectors("all")), *(challenger for _, challenger in pairs)] if pairs else []
    cfg = ReplayConfig(manifest=manifest, profile=profile, detectors=",".join(keys) or "all")
    if sweeps:
        (out / "sweeps.yaml").write_text(yaml.safe_dump(DEMO_SWEEPS, sort_keys=False))
        cfg = cfg.model_copy(update={"conditions_file": out / "sweeps.yaml"})
    n = len(cfg.resolve_conditions()[0])
    scorers = len(keys) or 4
    what = f"{anchors * 6} videos through {n} conditions x {scorers} detectors"
    echo(f"2/3 replaying {what} (profile {profile}, deterministic)")
    results = replay(cfg, run_dir, workers=workers)
    t2 = time.perf_counter()
    echo("3/3 evaluating (2,000 bootstrap replicates) and writing the report")
    paths = build_report(run_dir, flips=flips, comparisons=[f"{a}:{b}" for a, b in pairs])
    _rows, _info, ev = evaluate_run(run_dir)
    t3 = time.perf_counter()
    echo("")
    echo(PROXY_WARNING)
    echo("")
    echo("AUC (%) per condition, 95% CI, (drift from original):")
    echo(main_table(ev).to_markdown())
    if pairs:
        echo("")
        echo((run_dir / "comparison.md").read_text().strip())
    timings = {
        "corpus_s": round(t1 - t0, 1),
        "replay_s": round(t2 - t1, 1),
        "report_s": round(t3 - t2, 1),
        "total_s": round(t3 - t0, 1),
    }
    echo(f"report: {paths['html']} (also {paths['md'].name}, {paths['json'].name}); took {timings['total_s']} s")
    return {"paths": paths, "timings": timings, "evaluation": ev, "results": results}


def version_pairs() -> list[tuple[str, str]]:
    """(default, further version) of every installed detector that has a further version: ``npr@1.0.0-proxy1000``
    against ``npr@1.1.0-proxy1000-aug``."""
    have = list_versions()
    return [
        (f"{i.card.name}@{have[i.card.name].card.version}", i.key)
        for i in have.values()
        if not i.default and i.card.name in have
    ]
