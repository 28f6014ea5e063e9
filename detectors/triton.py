"""Detectors behind NVIDIA Triton: the model repository, a local server, the gRPC client runtime, TensorRT.

- :func:`write_repository` writes, per detector, ``config.pbtxt`` (production: onnxruntime on GPU, dynamic
  batching with preferred sizes and a queue policy, TensorRT FP16 with an engine cache), ``configs/cpu.pbtxt``
  (onnxruntime on CPU) and ``configs/local.pbtxt`` (the python backend running the same ``model.onnx``, for
  the Triton that ``pip install nvidia-pytriton`` ships); :class:`LocalTriton` stages a serving copy with the
  python backend's ``model.py``.
- :class:`LocalTriton` starts that bundled ``tritonserver`` with the local configs and stops it.
- :class:`TritonRuntime` implements the runtime interface over gRPC: it checks readiness and metadata
  against the model card at start, batches, sets timeouts, retries transient errors with backoff, and tells
  "Triton unavailable" (retry, never a verdict) from "bad request" (this video's error).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np

from detectors.card import ModelCard
from detectors.errors import BadRequest, CardError, RuntimeUnavailable
from detectors.repository import list_detectors, repository_path
from detectors.runtime import RuntimeStats, score_in_batches

MAX_BATCH = 16
PREFERRED_BATCHES = (4, 8, 16)
_DTYPES = {"uint8": ("TYPE_UINT8", "UINT8"), "float32": ("TYPE_FP32", "FP32")}


# -- model repository ----------------------------------------------------------------------------------------
def _io(card: ModelCard) -> str:
    s = card.sampling
    return (
        f'input [ {{ name: "{card.input.name}" data_type: {_DTYPES[card.input.dtype][0]} '
        f"dims: [ {s.frames}, {s.height}, {s.width}, 3 ] }} ]\n"
        f'output [ {{ name: "{card.output.name}" data_type: TYPE_FP32 dims: [ 1 ] reshape: {{ shape: [ ] }} }} ]\n'
    )


def _batching(queue_us: int) -> str:
    return (
        "dynamic_batching {\n"
        f"  preferred_batch_size: [ {', '.join(map(str, PREFERRED_BATCHES))} ]\n"
        f"  max_queue_delay_microseconds: {queue_us}\n"
        "  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 10000000 "
        "allow_timeout_override: true max_queue_size: 512 }\n"
        "}\n"
    )


def config_pbtxt(card: ModelCard, variant: str) -> str:
    """One of ``production`` (GPU, onnxruntime + TensorRT FP16), ``cpu`` or ``local`` (python backend)."""
    head = f'name: "{card.name}"\n'
    if variant == "local":
        head += 'backend: "python"\n'
    else:
        head += 'platform: "onnxruntime_onnx"\n'
    head += f"max_batch_size: {MAX_BATCH}\n" + _io(card)
    kind = "KIND_GPU" if variant == "production" else "KIND_CPU"
    # the python backend runs one single-threaded onnxruntime session per instance: two instances use two cores
    count = 2 if variant == "local" else 1
    body = f"instance_group [ {{ kind: {kind} count: {count} }} ]\n" + _batching(
        2000 if variant == "production" else 500
    )
    if variant == "production":
        body += (
            "optimization { execution_accelerators { gpu_execution_accelerator: [ {\n"
            '  name: "tensorrt"\n'
            '  parameters { key: "precision_mode" value: "FP16" }\n'
            '  parameters { key: "max_workspace_size_bytes" value: "1073741824" }\n'
            '  parameters { key: "trt_engine_cache_enable" value: "1" }\n'
            '  parameters { key: "trt_engine_cache_path" value: "/models/.trt_cache" }\n'
            "} ] } }\n"
        )
    params = f'parameters {{ key: "lastmile_card_version" value: {{ string_value: "{card.version}" }} }}\n'
    return head + body + params


def python_model_source() -> str:
    """The python-backend ``model.py`` that wraps a ``model.onnx`` (staged by :class:`LocalTriton`)."""
    return resources.files("detectors").joinpath("data/triton_python_model.py").read_text()


def write_repository(repo: str | Path | None = None) -> list[Path]:
    """Write the Triton configs (production, cpu, local) for every detector in ``repo``."""
    written = []
    for name, inst in list_detectors(repo).items():
        folder = repository_path(repo) / name
        (folder / "configs").mkdir(exist_ok=True)
        for path, variant in (
            (folder / "config.pbtxt", "production"),
            (folder / "configs" / "cpu.pbtxt", "cpu"),
            (folder / "configs" / "local.pbtxt", "local"),
        ):
            path.write_text(config_pbtxt(inst.card, variant))
            written.append(path)
    return written


# -- the local server ----------------------------------------------------------------------------------------
class TritonNotInstalled(RuntimeError):
    """The bundled tritonserver (extra ``triton-local``: nvidia-pytriton) is not installed."""


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
        from gateway.kafka_io import free_port

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
        for name, inst in list_detectors(self.repo).items():
            folder, target = self.repo / name, stage / name
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
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(libs), str(Path(sys.base_prefix) / "lib"), env.get("LD_LIBRARY_PATH", "")) if p
        )
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
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeUnavailable(f"tritonserver was not ready within {timeout_s} s")
            time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL (for the tests' crash case)."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._work, ignore_errors=True)

    def __enter__(self) -> LocalTriton:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- the client runtime --------------------------------------------------------------------------------------
class TritonRuntime:
    """The runtime interface over Triton's gRPC API."""

    name = "triton"

    def __init__(
        self,
        card: ModelCard,
        url: str = "127.0.0.1:8001",
        *,
        timeout_s: float = 30.0,
        retries: int = 6,
        backoff_s: float = 0.25,
        max_batch: int | None = None,
        startup_timeout_s: float = 30.0,
    ) -> None:
        import tritonclient.grpc as grpcclient

        self.card, self.url, self.timeout_s = card, url, timeout_s
        self.retries, self.backoff_s = retries, backoff_s
        self.client = grpcclient.InferenceServerClient(url)
        self.stats = RuntimeStats()
        self._grpc = grpcclient
        self.max_batch = self._check_model(startup_timeout_s, max_batch)

    def _check_model(self, timeout_s: float, max_batch: int | None) -> int:
        """Fail fast when the server's model does not match the card (names, dtype, shape)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self.client.is_model_ready(self.card.name):
                    break
                problem = f"model {self.card.name!r} is not ready on Triton at {self.url}"
            except Exception as exc:  # tritonclient raises InferenceServerException for a down server
                problem = f"Triton at {self.url} is unavailable: {exc}"
            if time.monotonic() > deadline:
                raise RuntimeUnavailable(problem)
            time.sleep(0.25)
        meta = self.client.get_model_metadata(self.card.name, as_json=True)
        config = self.client.get_model_config(self.card.name, as_json=True)["config"]
        inputs = {i["name"]: i for i in meta["inputs"]}
        want = [str(v) for v in self.card.input_shape(1)[1:]]
        if self.card.input.name not in inputs:
            raise CardError(
                f"{self.card.name}: the card's input {self.card.input.name!r} is not served by Triton "
                f"(served inputs: {sorted(inputs)})"
            )
        served = inputs[self.card.input.name]
        if served["datatype"] != _DTYPES[self.card.input.dtype][1]:
            raise CardError(
                f"{self.card.name}: the card says {self.card.input.dtype}, Triton serves {served['datatype']}"
            )
        if [str(v) for v in served["shape"][1:]] != want:
            raise CardError(
                f"{self.card.name}: the card's frames are [N, {', '.join(want)}], Triton serves {served['shape']}"
            )
        if self.card.output.name not in {o["name"] for o in meta["outputs"]}:
            raise CardError(f"{self.card.name}: the card's output {self.card.output.name!r} is not served by Triton")
        served_batch = int(config.get("max_batch_size", 0) or 1)
        return min(max_batch or served_batch, served_batch)

    def score(self, frames: np.ndarray) -> np.ndarray:
        return score_in_batches(self.card, frames, self.max_batch, self._infer, self.stats)

    def _infer(self, chunk: np.ndarray) -> np.ndarray:
        from tritonclient.utils import InferenceServerException

        grpc = self._grpc
        inp = grpc.InferInput(self.card.input.name, list(chunk.shape), _DTYPES[self.card.input.dtype][1])
        inp.set_data_from_numpy(chunk)
        wanted = [grpc.InferRequestedOutput(self.card.output.name)]
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                result = self.client.infer(self.card.name, [inp], outputs=wanted, client_timeout=self.timeout_s)
                scores = np.asarray(result.as_numpy(self.card.output.name)).reshape(-1)
                if scores.shape != (len(chunk),):
                    raise RuntimeUnavailable(f"Triton returned {scores.shape} scores for {len(chunk)} videos")
                return scores
            except InferenceServerException as exc:
                status = (exc.status() or "").upper()
                if "INVALID_ARG" in status:
                    raise BadRequest(f"{self.card.name}: Triton rejected the request: {exc.message()}") from exc
                last = exc  # UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, a restarting server: retry
            time.sleep(min(self.backoff_s * 2**attempt, 5.0))
        raise RuntimeUnavailable(
            f"{self.card.name}: Triton at {self.url} did not answer after {self.retries + 1} attempts: {last}"
        )


# -- TensorRT ------------------------------------------------------------------------------------------------
def build_tensorrt(name: str, repo: str | Path | None = None, trtexec: str | None = None) -> Path:
    """Build ``<name>_trt/1/model.plan`` with ``trtexec`` (FP16, min/opt/max batch 1/8/16) and its config.

    A plan is tied to the GPU model and the TensorRT version that built it: build one per Triton release and
    GPU type, on that GPU. Raises :class:`TritonNotInstalled` with a plain message when trtexec is absent.
    """
    trtexec = trtexec or shutil.which("trtexec")
    if not trtexec:
        raise TritonNotInstalled(
            "TensorRT is not installed here (no `trtexec` on PATH): build the plan on a GPU "
            "machine with TensorRT, e.g. inside the NGC tritonserver image, for that GPU"
        )
    inst = list_detectors(repo)[name]
    s = inst.card.sampling
    dims = f"{s.frames}x{s.height}x{s.width}x3"
    folder = repository_path(repo) / f"{name}_trt"
    (folder / "1").mkdir(parents=True, exist_ok=True)
    plan = folder / "1" / "model.plan"
    inp = inst.card.input.name
    subprocess.run(
        [
            trtexec,
            f"--onnx={inst.model_path}",
            f"--saveEngine={plan}",
            "--fp16",
            f"--minShapes={inp}:1x{dims}",
            f"--optShapes={inp}:8x{dims}",
            f"--maxShapes={inp}:{MAX_BATCH}x{dims}",
        ],
        check=True,
    )
    config = config_pbtxt(inst.card, "production").replace('platform: "onnxruntime_onnx"', 'platform: "tensorrt_plan"')
    config = config.replace(f'name: "{name}"', f'name: "{name}_trt"').split("optimization {")[0]
    (folder / "config.pbtxt").write_text(config)
    return plan
