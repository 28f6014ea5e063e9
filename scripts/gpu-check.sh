#!/usr/bin/env bash
# One prepared check for a machine with an NVIDIA GPU (no network needed; it uses what is installed):
#   machine.json     nvidia-smi, onnxruntime's execution providers, NVENC in PyAV's FFmpeg, an ffmpeg CLI
#   transforms.json  the six-condition fan-out per input: throughput with NVENC tails and with libx264 tails
#                    (same machine, same run), fidelity; the floor where an ffmpeg CLI is present
#   detectors.json   each detector on onnxruntime's CPU, CUDA and TensorRT providers, where installed: videos/s
#                    at the request shape (6), the runtime's largest batch (16) and 64, with and without I/O
#                    binding; parity with the CPU (TF32 off and on) and node placement
#   detectors.md     the table of docs/gpu.md from detectors.json
# Options after OUT go to `lastmile bench gpu`: --quick, --part detectors (skip the transforms part), ...
# Each missing part is skipped with its reason; each part's JSON is written as it ends. Under ten minutes.
#   usage: bash scripts/gpu-check.sh [OUT] [--quick] [--part transforms|detectors ...]
set -u
OUT="${1:-gpu-check-out}"
shift || true
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
LIMIT="${GPU_CHECK_LIMIT:-540}"  # seconds for the whole check, under the caller's own limit
timeout "$LIMIT" "$PY" -m gateway.cli bench gpu --out "$OUT" "$@" > "$OUT/gpu-check.log" 2>&1
rc=$?
echo "exit $rc (124 = the time limit); written to $OUT:"
ls -la "$OUT"
if [ -f "$OUT/detectors.md" ]; then cat "$OUT/detectors.md"; fi
exit "$rc"
