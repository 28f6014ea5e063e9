"""Issue 3's bar on a freshly synthesised, held-out proxy corpus: the committed detectors really detect, and
NPR loses AUC under `spatial` as in the paper. (A proxy corpus: these are properties of the proxy.)"""

from __future__ import annotations

import pytest

from detectors.proxy.corpus import CorpusConfig, synthesize
from gateway.batch.replay import ReplayConfig, replay
from gateway.batch.results import read_results
from gateway.evaluation.paired import evaluate

HELD_OUT_SEED = 31337  # detectors were trained and calibrated on seed 1000


@pytest.mark.slow
def test_reference_detectors_on_a_held_out_proxy_corpus(tmp_path):
    manifest = synthesize(CorpusConfig(anchors=10, seed=HELD_OUT_SEED), tmp_path / "corpus")
    cfg = ReplayConfig(manifest=manifest, conditions="original,spatial", profile="throughput")
    ev = evaluate(read_results(replay(cfg, tmp_path / "run", progress=False)), replicates=500)
    original = {d: ev.cell(d, "original").auc for d in ev.detectors}
    assert sum(auc >= 0.85 for auc in original.values()) >= 2, original
    npr_original, npr_spatial = ev.cell("npr", "original"), ev.cell("npr", "spatial")
    assert npr_spatial.auc < npr_original.auc - 0.05, (npr_original.auc, npr_spatial.auc)
    assert npr_spatial.auc_drift_ci[1] < 0  # the drop's 95 % interval excludes zero
