#!/usr/bin/env bash
# One prepared check for a machine with an NVIDIA GPU (no network needed; uses what is installed):
#   1. the machine: nvidia-smi, onnxruntime's providers, NVENC in PyAV's FFmpeg
#   2. the transform bench with the throughput profile, whose H.264 tails use NVENC where it opens
#   3. the detector bench on onnxruntime-gpu (CUDA) and TensorRT execution providers, where installed
# Each missing part is skipped with its reason. Everything lands as JSON in $OUT (default ./gpu-check-out),
# in under ten minutes (each part has its own time limit).
#   usage: bash scripts/gpu-check.sh [OUT]
set -u
OUT="${1:-gpu-check-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
cd "$(dirname "$0")/.."

echo "== machine"
"$PY" - "$OUT/machine.json" <<'PYEOF'
import json, shutil, subprocess, sys
out = {"nvidia_smi": None, "onnxruntime_providers": [], "nvenc": False, "skipped": {}}
if shutil.which("nvidia-smi"):
    q = "name,memory.total,driver_version,encoder.stats.sessionCount"
    r = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True, text=True)
    out["nvidia_smi"] = r.stdout.strip() or r.stderr.strip()
else:
    out["skipped"]["nvidia_smi"] = "nvidia-smi not on PATH"
try:
    import onnxruntime as ort
    out["onnxruntime_providers"] = ort.get_available_providers()
except Exception as exc:
    out["skipped"]["onnxruntime"] = repr(exc)
from transforms.codecs import nvenc_available
out["nvenc"] = nvenc_available()
if not out["nvenc"]:
    out["skipped"]["nvenc"] = "h264_nvenc is not in PyAV's FFmpeg or does not open on this GPU"
json.dump(out, open(sys.argv[1], "w"), indent=2)
print(json.dumps(out, indent=2))
PYEOF

echo "== transforms (throughput profile: NVENC tails where available)"
timeout 300 "$PY" -m gateway.cli bench transforms --quick --profiles throughput --json "$OUT/transforms.json" \
  > "$OUT/transforms.log" 2>&1 || echo "{\"skipped\": \"bench transforms failed or timed out: see transforms.log\"}" > "$OUT/transforms.json"
tail -3 "$OUT/transforms.log"

echo "== detectors on GPU execution providers"
timeout 240 "$PY" - "$OUT/detectors.json" <<'PYEOF'
import json, sys, time
import numpy as np
import onnxruntime as ort
from detectors.repository import list_detectors

available = ort.get_available_providers()
wanted = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}
out = {"providers": available, "results": {}, "skipped": {}}
for label, provider in wanted.items():
    if provider not in available:
        out["skipped"][label] = f"{provider} is not in this onnxruntime build ({available})"
        continue
    for name, inst in list_detectors().items():
        try:
            sess = ort.InferenceSession(str(inst.model_path), providers=[provider])
            frames = np.random.default_rng(0).integers(0, 256, inst.card.input_shape(16), dtype=np.uint8)
            feed = {inst.card.input.name: frames}
            sess.run(None, feed)  # warm-up (TensorRT builds its engine here)
            t0, n = time.perf_counter(), 0
            while time.perf_counter() - t0 < 3.0:
                sess.run(None, feed)
                n += 1
            dt = (time.perf_counter() - t0) / n
            out["results"].setdefault(label, {})[name] = {"batch": 16, "ms_per_batch": round(dt * 1000, 2),
                                                          "videos_per_s": round(16 / dt, 1)}
        except Exception as exc:
            out["skipped"][f"{label}:{name}"] = repr(exc)[:300]
json.dump(out, open(sys.argv[1], "w"), indent=2)
print(json.dumps(out, indent=2))
PYEOF
echo "== written to $OUT: machine.json transforms.json detectors.json"
