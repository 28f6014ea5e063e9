"""The Triton that the nvidia-pytriton wheel bundles (2.51, python backend only), on loopback.

:class:`LocalTriton` stages a serving copy of a model repository (configs, the ONNX file linked, the python
backend's ``model.py``), starts ``tritonserver`` with the local configs, waits until it is ready, and stops it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from detectors.errors import RuntimeUnavailable, TritonNotInstalled
from detectors.repository import list_detectors, repository_path
from detectors.serving.config import config_pbtxt, python_model_source
from detectors.serving.processes import free_port, kill_group, stop_group


def bundled_server() -> tuple[Path, Path, Path]:
    """(tritonserver binary, its python backend folder, nvidia_pytriton.libs) from the nvidia-pytriton wheel."""
    import importlib.util

    spec = importlib.util.find_spec("pytriton")  # located, never imported: only its bundled server is used
    if spec is None or not spec.submodule_search_locations:
        raise TritonNotInstalled(
            "the local Triton needs nvidia-pytriton: pip install --no-deps nvidia-pytriton "
            "(its numpy<2 pin conflicts with pyarrow; only its bundled tritonserver is used)"
        )
    package = Path(next(iter(spec.submodule_search_locations)))
    root, libs = package / "tritonserver", package.parent / "nvidia_pytriton.libs"
    if not (root / "bin" / "tritonserver").exists():
        raise TritonNotInstalled(f"nvidia-pytriton ships no tritonserver at {root}")
    return root / "bin" / "tritonserver", root, libs


def server_environment(libs: Path) -> dict[str, str]:
    """tritonserver's environment: its bundled libraries, and this interpreter for the python backend's stubs.

    The stub embeds the first Python of its version on PATH; run from a virtualenv that is not on PATH it
    picked the system's Python, without numpy, and every model failed to load. This interpreter's folder goes
    first on PATH and its import path becomes PYTHONPATH, so the stubs import what this process imports.
    """
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(libs), str(Path(sys.base_prefix) / "lib"), env.get("LD_LIBRARY_PATH", "")) if p
    )
    env["PATH"] = os.pathsep.join(p for p in (str(Path(sys.executable).parent), env.get("PATH", "")) if p)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and Path(p).is_dir())
    return env


class LocalTriton:
    """The Triton that nvidia-pytriton ships, on loopback, serving a repository with its local configs."""

    def __init__(
        self,
        repo: str | Path | None = None,
        http_port: int = 0,
        grpc_port: int = 0,
        metrics_port: int = 0,
        config_name: str = "local",
        log: Path | None = None,
    ) -> None:
        self.repo = repository_path(repo)
        self.http_port = http_port or free_port()
        self.grpc_port = grpc_port or free_port()
        self.metrics_port = metrics_port or free_port()
        self.config_name, self.log = config_name, log
        self.process: subprocess.Popen | None = None
        self._work = Path(tempfile.mkdtemp(prefix="lastmile-triton-"))
        self._backends = self._work / "backends"

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def _prepare_backend(self) -> None:
        _binary, root, _ = bundled_server()
        py = self._backends / "python"
        py.mkdir(parents=True, exist_ok=True)
        for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
            if not (py / name).exists():
                (py / name).symlink_to(root / "backends" / "python" / name)
        stub = (
            root
            / "python_backend_stubs"
            / f"{sys.version_info.major}.{sys.version_info.minor}"
            / "triton_python_backend_stub"
        )
        if not stub.exists():
            raise TritonNotInstalled(
                f"no python-backend stub for Python {sys.version_info[:2]} in {stub.parent.parent}"
            )
        shutil.copy2(stub, py / "triton_python_backend_stub")

    def _stage_repository(self) -> Path:
        """A serving copy of the repository: the configs, the ONNX file linked, and the python-backend model.py.

        Nothing is written into the model repository itself (it may be an installed, read-only package).
        """
        stage = self._work / "repo"
        source = python_model_source()
        for name, inst in list_detectors(self.repo).items():  # the shipped detectors and the user's
            if inst.card.remote is not None:  # served elsewhere
                continue
            folder, target = inst.folder, stage / name
            (target / "1").mkdir(parents=True, exist_ok=True)
            (target / "configs").mkdir(exist_ok=True)
            for rel, variant in (
                ("config.pbtxt", "production"),
                (f"configs/{self.config_name}.pbtxt", self.config_name),
            ):
                text = (folder / rel).read_text() if (folder / rel).exists() else config_pbtxt(inst.card, variant)
                (target / rel).write_text(text)
            link = target / "1" / "model.onnx"
            if not link.exists():
                link.symlink_to(inst.model_path.resolve())
            (target / "1" / "model.py").write_text(source)
        return stage

    def start(self, timeout_s: float = 120.0) -> LocalTriton:
        binary, _, libs = bundled_server()
        self._prepare_backend()
        served = self._stage_repository()
        env = server_environment(libs)
        cmd = [
            str(binary),
            f"--model-repository={served}",
            f"--backend-directory={self._backends}",
            f"--model-config-name={self.config_name}",
            "--http-address=127.0.0.1",
            "--grpc-address=127.0.0.1",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            "--strict-readiness=true",
            "--exit-timeout-secs=10",
        ]
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL  # noqa: SIM115 - the server outlives this call
        self.process = subprocess.Popen(cmd, stdout=out, stderr=out, env=env, start_new_session=True)
        self.wait_ready(timeout_s)
        return self

    def wait_ready(self, timeout_s: float) -> None:
        import urllib.error
        import urllib.request

        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeUnavailable(f"tritonserver exited with {self.process.returncode} while starting")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/v2/health/ready", timeout=2) as r:
                    if r.status == 200 and self._listening(self.grpc_port, self.metrics_port):
                        return  # every endpoint it prints: the metrics service starts after the HTTP one
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeUnavailable(f"tritonserver was not ready within {timeout_s} s")
            time.sleep(0.2)

    @staticmethod
    def _listening(*ports: int) -> bool:
        """Whether something accepts connections on each of ``ports`` of loopback."""
        import socket

        for port in ports:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) != 0:
                    return False
        return True

    def kill(self) -> None:
        """SIGKILL the server and its stubs (the tests' crash case)."""
        if self.process:
            kill_group(self.process)

    def stop(self) -> None:
        """SIGTERM the server, wait, and leave none of its processes behind."""
        if self.process:
            stop_group(self.process)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._work, ignore_errors=True)

    def __enter__(self) -> LocalTriton:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
