"""Counts in the lines a user reads agree with their nouns."""

from __future__ import annotations

from gateway.batch.failures import summarize
from gateway.core.messages import ScoreRow
from gateway.core.wording import counted


def test_a_count_of_one_is_singular_and_every_other_count_plural():
    assert [counted(n, "row") for n in (0, 1, 2)] == ["0 rows", "1 row", "2 rows"]
    assert [counted(n, "cell has", "cells have") for n in (1, 3)] == ["1 cell has", "3 cells have"]


def test_a_failure_line_of_one_row_says_row_and_video():
    common = dict(detector="d", detector_version="1", runtime="sim", condition="original", label="real", source="real")
    failed = ScoreRow(video_id="v", anchor_id="v", error="boom", error_kind="infra", error_class="Down", **common)
    (line,) = summarize([failed]).lines(with_bound=False)[:1]
    assert line == "infra error Down: 1 row (1 video); first: boom"
