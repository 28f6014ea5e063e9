"""The test layers, and the one place each test gets its layer (applied by ``tests/conftest.py``).

Each test module sits in one layer, by what it starts; a test that asks for the shared broker (the ``broker``
fixture) is in the broker layer wherever it sits. ``pytest -m unit`` is the edit-test loop; the README's test
command runs every layer. A unit test that starts a process fails (:func:`no_processes`), so a module that starts
one cannot stay in the unit layer by mistake."""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

LAYERS = {
    "unit": "pure functions and in-process objects: no subprocess, no broker, no server",
    "process": "starts processes of its own (the ffmpeg CLI, worker pools, the command line, an object store), no "
    "broker or detector server",
    "broker": "needs the local Kafka broker (Tansu)",
    "stack": "starts `lastmile up`, Triton, Prometheus, a browser, or a gateway or monitor process",
    "install": "builds the wheel and installs it in a fresh virtualenv",
}

INSTALL = frozenset({"test_installed"})
STACK = frozenset({
    "test_ab_prometheus", "test_ab_stream", "test_attach", "test_bench_monitor", "test_faults", "test_fates",
    "test_live_page", "test_local_servers", "test_monitor_checkpoint",
    "test_monitor_labels", "test_monitor_stream", "test_remote", "test_triton", "test_up", "test_up_signals",
})  # fmt: skip
BROKER = frozenset({
    "test_bench_bus", "test_bus", "test_bus_contract", "test_bus_kafka_python", "test_bus_tls", "test_content_digest",
    "test_fuzz_records", "test_gateway", "test_group_membership", "test_outside_clients", "test_poison_records",
    "test_record_limits", "test_replay", "test_shadow", "test_source_urls",
})  # fmt: skip
PROCESS = frozenset({
    "test_augment", "test_bench_gateway", "test_bench_gpu", "test_calibrate_replay", "test_cards", "test_chart",
    "test_chart_checks", "test_chat_replay",
    "test_cli_errors", "test_cli_transform", "test_compose", "test_conditions", "test_corpus", "test_demo",
    "test_deploy", "test_engine", "test_gpu_placement", "test_input_check", "test_layout", "test_logs", "test_measure",
    "test_memory",
    "test_metric_catalogue", "test_metrics", "test_monitor_allocator", "test_pool", "test_reference_quality",
    "test_sampling", "test_step_registry", "test_store_sources", "test_sweeps",
})  # fmt: skip
# modules that start the bundled tritonserver run on one worker, one after another: two servers starting at once
# on two workers aborted (exit -6) in one clean-clone run
GROUPS = {
    m: "tritonserver" for m in ("test_faults", "test_installed", "test_local_servers", "test_remote", "test_triton")
}
BROKER_FIXTURES = frozenset({"broker"})
PROCESS_FIXTURES = frozenset({"media"})  # made with the ffmpeg CLI


def group_of(module: str) -> str:
    """The xdist group of a test of ``module``: its module, or a group shared with modules it must not overlap."""
    return GROUPS.get(module, module)


def layer_of(module: str, fixtures: Iterable[str]) -> str:
    """The layer of a test of ``module`` (its name, e.g. ``test_gateway``) that uses ``fixtures``."""
    used = set(fixtures)
    if module in INSTALL:
        return "install"
    if module in STACK:
        return "stack"
    if module in BROKER or used & BROKER_FIXTURES:
        return "broker"
    if module in PROCESS or used & PROCESS_FIXTURES:
        return "process"
    return "unit"


class LayerViolation(AssertionError):
    """A unit test started a process: its module belongs in another layer (:mod:`tests.support.layers`)."""


@contextmanager
def no_processes(test: str = "a unit test") -> Iterator[None]:
    """While inside, starting a process raises :class:`LayerViolation`: a subprocess (every ``subprocess`` call
    goes through ``Popen._execute_child``), a ``multiprocessing`` process (pools and executors too), ``os.fork``
    and ``os.posix_spawn``."""

    def refuse(*_args, **_kwargs):
        raise LayerViolation(f"{test} started a process; a unit test starts none: move its module to the layer "
                             "that says what it starts (tests/support/layers.py)")  # fmt: skip

    saved = [
        (subprocess.Popen, "_execute_child"),
        (multiprocessing.process.BaseProcess, "start"),
        (os, "fork"),
        (os, "posix_spawn"),
        (os, "posix_spawnp"),
    ]
    originals = [(owner, name, getattr(owner, name)) for owner, name in saved if hasattr(owner, name)]
    for owner, name, _ in originals:
        setattr(owner, name, refuse)
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")  # an interpreter's own, for its life


def leftover_children() -> list[tuple[int, str]]:
    """This process's children that are alive (not zombies) and not one of multiprocessing's :data:`HELPERS`: their
    pid and command line (read from /proc)."""
    me, out = os.getpid(), []
    # os.listdir, not Path.glob: glob ends its walk early and silently on one entry's PermissionError
    for pid in (int(name) for name in os.listdir("/proc") if name.isdigit()):
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue  # (gone meanwhile, or not ours to read)
        state, ppid = text[text.rindex(")") + 2 :].split()[:2]
        if int(ppid) == me and state != "Z" and not any(h in command for h in HELPERS):
            out.append((pid, command[:200]))
    return out
