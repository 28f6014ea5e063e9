"""Which videos a condition flipped (gateway.evaluation.flips), from rows written out by hand: each direction read
from the decision pair, ranked by the score's change, limited, unscored rows and other versions kept apart."""

from __future__ import annotations

import pytest

from gateway.core.messages import ScoreRow
from gateway.evaluation.flips import FlipsError, find_flips, paired_count
from gateway.evaluation.strips import safe_name


def row(vid, cond, score, thr=0.0, det="npr", version="1", label="real", error=None) -> ScoreRow:
    scored = error is None
    return ScoreRow(
        video_id=vid, condition=cond, detector=det, detector_version=version, runtime="embedded", label=label,
        score=score if scored else None, decision=(score > thr) if scored else None, threshold=thr if scored else None,
        error=error, error_kind="video" if error else None, input_sha256="a" * 64, variant_sha256=f"{vid}-{cond}",
    )  # fmt: skip


ROWS = [
    # video: original, full -> flips real->generated when the score crosses 0 upward
    row("a", "original", -1.0), row("a", "full", 2.0),  # +3.0, real -> generated
    row("b", "original", -0.5), row("b", "full", 0.5),  # +1.0, real -> generated
    row("c", "original", 1.0, label="generated"), row("c", "full", -4.0, label="generated"),  # -5.0, gen -> real
    row("d", "original", 1.0), row("d", "full", 3.0),  # both generated: no flip
    row("e", "original", -1.0), row("e", "full", None, error="InvalidVideo: broken"),  # unscored: no pair
    row("f", "full", 5.0),  # no original row: no pair
    row("g", "original", -2.0, thr=-3.0), row("g", "full", -2.5, thr=-3.0),  # thresholds of their own: no flip
    row("a", "original", -1.0, version="2"), row("a", "full", -2.0, version="2"),  # another version: no flip
    row("a", "spatial", 9.0),
]  # fmt: skip


def test_flips_are_the_decision_pairs_ranked_by_the_score_change():
    got = find_flips(ROWS, "npr@1", "full")
    assert [(f.video_id, f.change) for f in got["real_to_generated"]] == [("a", 3.0), ("b", 1.0)]
    assert [(f.video_id, f.change) for f in got["generated_to_real"]] == [("c", -5.0)]
    for f in got["real_to_generated"] + got["generated_to_real"]:
        before = next(r for r in ROWS if (r.video_id, r.condition, r.detector_version) == (f.video_id, "original", "1"))
        after = next(r for r in ROWS if (r.video_id, r.condition, r.detector_version) == (f.video_id, "full", "1"))
        assert (f.original_decision, f.variant_decision) == (before.decision, after.decision)
        assert f.verdicts == " -> ".join("generated" if d else "real" for d in (before.decision, after.decision))
        assert f.variant_sha256 == after.variant_sha256
    assert paired_count(ROWS, "npr@1", "full") == 5  # a, b, c, d, g: e unscored, f without original


def test_a_bare_name_of_several_versions_is_refused_and_the_limit_is_per_direction():
    with pytest.raises(FlipsError, match=r"several versions of npr: name one \(npr@1, npr@2\)"):
        find_flips(ROWS, "npr", "full")
    one_version = [r for r in ROWS if r.detector_version == "1"]
    assert find_flips(one_version, "npr", "full") == find_flips(ROWS, "npr@1", "full")
    assert [f.video_id for f in find_flips(ROWS, "npr@1", "full", limit=1)["real_to_generated"]] == ["a"]
    assert find_flips(ROWS, "npr@2", "full") == {"real_to_generated": [], "generated_to_real": []}
    assert find_flips(ROWS, "npr@1", "spatial")["real_to_generated"][0].video_id == "a"


def test_a_question_the_rows_cannot_answer_is_a_typed_error():
    with pytest.raises(FlipsError, match="original is what"):
        find_flips(ROWS, "npr@1", "original")
    with pytest.raises(FlipsError, match="no scored row of detector 'd3'"):
        find_flips(ROWS, "d3", "full")
    with pytest.raises(FlipsError, match="its conditions: full, original, spatial"):
        find_flips(ROWS, "npr@1", "temporal")
    with pytest.raises(ValueError):
        find_flips(ROWS, "npr@1", "full", limit=-1)


def test_a_video_id_becomes_a_file_name_that_stays_in_its_folder():
    names = {safe_name(v) for v in ("../../etc/passwd", "a/b", "a_b", ".hidden", "é", "full^2", "full_2")}
    assert len(names) == 7
    assert all("/" not in n and not n.startswith(".") for n in names)


def test_at_a_report_threshold_the_decisions_are_the_scores_against_it_not_the_rows_own():
    at_two = find_flips(ROWS, "npr@1", "full", threshold=2.0)  # a recalibrated threshold: score >= 2.0 is generated
    assert [(f.video_id, f.verdicts) for f in at_two["real_to_generated"]] == [("a", "real -> generated"),
                                                                              ("d", "real -> generated")]  # fmt: skip
    assert at_two["generated_to_real"] == []
    assert {f.original_threshold for f in at_two["real_to_generated"]} == {2.0}
    undecided = [r.model_copy(update={"decision": None}) for r in ROWS]  # rows need no decision field: it is derived
    assert find_flips(undecided, "npr@1", "full") == find_flips(ROWS, "npr@1", "full")


def test_the_reports_flips_lead_with_harm_three_of_each_kind_at_most(tmp_path):
    """The report's section shows missed fakes (generated -> real on a generated video) and false alarms (real ->
    generated on a real one) first, at most three of each, largest change first; corrections are counted only."""
    from gateway.evaluation.flips_report import KINDS, flip_sections

    rows = []
    for i in range(5):  # five of each kind, the change growing with i
        rows += [row(f"m{i}", "original", 1.0, label="generated"), row(f"m{i}", "full", -1.0 - i, label="generated")]
        rows += [row(f"f{i}", "original", -1.0), row(f"f{i}", "full", 1.0 + i)]
        rows += [row(f"c{i}", "original", -1.0, label="generated"), row(f"c{i}", "full", 1.0 + i, label="generated")]
    (section,), why = flip_sections(rows, ["original", "full"], tmp_path / "no-run")
    assert list(section.shown) == list(KINDS) == ["missed_fake", "false_alarm", "correction", "unlabelled"]
    assert section.kinds == {"missed_fake": 5, "false_alarm": 5, "correction": 5, "unlabelled": 0}
    assert [s.flip.video_id for s in section.shown["missed_fake"]] == ["m4", "m3", "m2"]
    assert [s.flip.video_id for s in section.shown["false_alarm"]] == ["f4", "f3", "f2"]
    assert section.shown["correction"] == []  # counted (5), not drawn: no strip of a flip that did no harm
    assert why and all(s.path is None for k in KINDS for s in section.shown[k])  # (no run to draw from: said why)


def test_a_strips_caption_is_readable_at_full_size():
    """The captions were about 8 px high; the font is now 14 px: its letters span at least 12 px of the strip."""
    import numpy as np

    from gateway.evaluation.strips import CAPTION, compose

    frames = np.full((2, 40, 60, 3), 255, np.uint8)
    image = np.asarray(compose([frames], ["Ag original, score +1.234 (threshold +0.500)"]))
    band = (image[:CAPTION] < 128).any(axis=(1, 2))  # rows of the caption band with ink
    assert band.any() and np.flatnonzero(band)[-1] - np.flatnonzero(band)[0] + 1 >= 12
