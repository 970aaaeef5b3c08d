#!/usr/bin/env bash
# Run every benchmarks/sweep_*.py on the GPU machine from the source tree, each with its own time budget, into
# OUT_DIR/<name>/ (+ OUT_DIR/<name>.log). Usage: bash scripts/gpu_sweeps.sh OUT_DIR [BUDGET_S per sweep (90)] [names...]
set -u
OUT=${1:?usage: gpu_sweeps.sh OUT_DIR [BUDGET_S] [names...]}
B=${2:-90}
shift; [ $# -gt 0 ] && shift
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
NAMES=("$@")
if [ ${#NAMES[@]} -eq 0 ]; then
  for f in benchmarks/sweep_*.py; do
    n=$(basename "$f" .py); [ "$n" = sweep_common ] || NAMES+=("${n#sweep_}")  # (sweep_common: their helpers)
  done
fi
for n in "${NAMES[@]}"; do
  f=benchmarks/sweep_$n.py
  [ -f "$f" ] || { echo "== $n: no $f"; continue; }
  echo "== sweep $n (budget ${B}s)"
  timeout $((B + 60)) python3 "$f" --out "$OUT/$n" --budget-s "$B" > "$OUT/$n.log" 2>&1
  echo "rc=$? $(wc -l < "$OUT/$n.log") lines"
done
