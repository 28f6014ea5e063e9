#!/usr/bin/env bash
# One prepared check for a machine with an NVIDIA GPU (no network needed; it uses what is installed):
#   machine.json     nvidia-smi, onnxruntime's execution providers, NVENC in PyAV's FFmpeg, an ffmpeg CLI
#   transforms.json  the six-condition fan-out per input: throughput with NVENC tails and with libx264 tails
#                    (same machine, same run), fidelity; the floor where an ffmpeg CLI is present
#   detectors.json   each detector on onnxruntime's CPU, CUDA and TensorRT providers, where installed: videos/s
#                    at the request shape (6) and the largest batch (16), with and without I/O binding; parity
# Each missing part is skipped with its reason; each part's JSON is written as it ends. Under ten minutes.
#   usage: bash scripts/gpu-check.sh [OUT] [--quick]
set -u
OUT="${1:-gpu-check-out}"
shift || true
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
timeout 540 "$PY" -m gateway.cli bench gpu --out "$OUT" "$@" > "$OUT/gpu-check.log" 2>&1
echo "exit $? (124 = the time limit); written to $OUT:"
ls -la "$OUT"
