#!/usr/bin/env bash
# Diagnostics on the GPU machine: host cost per decode-shaped call (+cProfile), kernel times under Nsight Compute,
# safetensors load rate, int4 GEMV bandwidth. Usage: bash scripts/gpu_diag.sh OUT_DIR
set -u
OUT=${1:?usage: gpu_diag.sh OUT_DIR}
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/info.txt" 2>&1
timeout 150 python3 benchmarks/profile_host.py --profile > "$OUT/profile.log" 2>&1
echo "profile rc=$?"
if command -v ncu >/dev/null; then
  timeout 150 ncu --metrics gpu__time_duration.sum --csv --launch-skip 0 --launch-count 200 \
    python3 benchmarks/profile_host.py --calls 3 --only linear,decode,sdpa,rms,rope,kv,embedding > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
  echo "ncu rc=$?"
fi
timeout 120 python3 benchmarks/bench_generate.py --device cuda --gemv-only > "$OUT/gemv.log" 2>&1
echo "gemv rc=$?"
timeout 150 python3 benchmarks/bench_load.py --device cuda --gib 4 --dir /tmp/nbx_ckpt --out "$OUT" > "$OUT/load.log" 2>&1
echo "load rc=$?"
