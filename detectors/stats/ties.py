"""Runs of tied values in an ascending array: the one place the package finds them (the mid-ranks of
:func:`average_ranks`, DeLong's structural components, the KS distance's steps)."""

from __future__ import annotations

import numpy as np


def run_starts(ascending: np.ndarray) -> np.ndarray:
    """Per position of an ascending array, whether it starts a run of equal values."""
    first = np.ones(ascending.size, bool)
    np.not_equal(ascending[1:], ascending[:-1], out=first[1:])
    return first


def run_ends(ascending: np.ndarray) -> np.ndarray:
    """Where each run of equal values of an ascending array ends (one past its last position)."""
    return _ends(run_starts(ascending))


def runs(ascending: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The runs of equal values of an ascending array: per position, its run's index; per run, where it ends
    (one past its last position)."""
    first = run_starts(ascending)
    return np.cumsum(first) - 1, _ends(first)


def _ends(first: np.ndarray) -> np.ndarray:
    return np.append(np.flatnonzero(first)[1:], first.size) if first.size else np.empty(0, np.int64)


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given the mean of the ranks they span: r_i = (s + e + 1) / 2 for the run of ties at
    0-based sorted positions s..e-1 holding i (scipy's ``rankdata``, method "average", value for value: every rank is
    a whole or half number). Here so that the monitor need not import ``scipy.stats`` (about 70 MB of its memory)."""
    v = np.asarray(values, dtype=np.float64)
    if np.isnan(v).any():  # as rankdata: a NaN makes every rank NaN
        return np.full(v.size, np.nan)
    order = np.argsort(v, kind="stable")
    run, ends = runs(v[order])
    starts = np.append(0, ends[:-1])
    out = np.empty(v.size, np.float64)
    out[order] = ((starts + ends + 1) / 2)[run]
    return out
