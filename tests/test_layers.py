"""The test layers (tests/support/layers.py): a unit test cannot start a process, every module has one layer, and
each test carries its layer's marker and its module's xdist group."""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.layers import BROKER, INSTALL, PROCESS, STACK, LayerViolation, layer_of, no_processes

TESTS = Path(__file__).resolve().parent


def test_this_test_is_in_the_unit_layer_and_its_modules_group(request):
    assert request.node.get_closest_marker("unit") is not None
    assert request.node.get_closest_marker("xdist_group").args == ("test_layers",)


@pytest.mark.parametrize(
    "start",
    [
        lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
        lambda: subprocess.Popen(["true"]),
        lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
        lambda: multiprocessing.get_context("fork").Process(target=print).start(),
    ],
    ids=["subprocess.run", "Popen", "spawn", "fork-context"],
)
def test_a_unit_test_that_starts_a_process_fails_and_names_the_fix(start):
    with pytest.raises(LayerViolation, match="a unit test starts none: move its module"):
        start()  # (the guard is on: this test is a unit test)


def test_the_guard_covers_fork_and_spawn_and_is_undone_outside_it():
    before = (subprocess.Popen._execute_child, os.fork, os.posix_spawn)
    with no_processes("x"):  # (nested: the unit guard is on too)
        assert all(now is not then for now, then in zip((os.fork, os.posix_spawn), before[1:], strict=True))
        with pytest.raises(LayerViolation):
            os.posix_spawn("/bin/true", ["true"], {})  # (were the guard broken, this starts only /bin/true)
    assert (subprocess.Popen._execute_child, os.fork, os.posix_spawn) == before  # as it was: the unit guard's


def test_every_listed_module_exists_and_has_one_layer():
    modules = {p.stem for p in TESTS.glob("test_*.py")}
    lists = [INSTALL, STACK, BROKER, PROCESS]
    assert set().union(*lists) <= modules, set().union(*lists) - modules
    assert sum(len(x) for x in lists) == len(set().union(*lists)), "a module listed in two layers"


def test_a_test_that_asks_for_the_broker_is_in_the_broker_layer_wherever_it_sits():
    assert layer_of("test_monitor", ["broker", "tmp_path"]) == "broker"
    assert layer_of("test_monitor", ["tmp_path"]) == "unit"
    assert layer_of("test_wording", ["media"]) == "process"
    assert layer_of("test_up", ["broker"]) == "stack"
    assert layer_of("test_installed", []) == "install"


def test_no_test_module_imports_another():
    for path in [*TESTS.glob("*.py"), *TESTS.glob("support/*.py")]:
        assert not re.search(r"^\s*(from|import) tests\.test_", path.read_text(), re.MULTILINE), path.name
