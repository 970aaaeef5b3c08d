"""safetensors load rate to a device: a sharded Hugging Face-style checkpoint (bf16, Llama-layer-shaped tensors)
written once, then loaded with ``nbxtensor.io.sharded.load_checkpoint`` (ours) and with ``safetensors.torch.load_file`` per shard
onto the same device in a separate process (the peer; the library's process never imports torch).

Usage (GPU machine, from the source tree)::

    PYTHONPATH=src python3 benchmarks/bench_load.py --device cuda --gib 4 --dir /tmp/ckpt [--out DIR]

Rows: ``write`` (ours, save_file), ``load.<device>`` per repetition with GB/s, and ``peer.safetensors.torch``.
The page cache is dropped before each load where the process may (root on Linux writes
``/proc/sys/vm/drop_caches``); the row says ``cold`` or ``warm`` so a reader knows whether the disk or host memory
was the source.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

import nbxtensor as nbx
from nbxtensor.io.sharded import load_checkpoint

PEER = r"""
import json, sys, time, glob, torch
from safetensors.torch import load_file
files = sorted(glob.glob(sys.argv[1] + "/*.safetensors"))
dev = sys.argv[2]
torch.cuda.synchronize() if dev.startswith("cuda") else None
t0 = time.perf_counter(); n = 0
for f in files:
    sd = load_file(f, device=dev)
    n += sum(t.numel() * t.element_size() for t in sd.values())
if dev.startswith("cuda"):
    torch.cuda.synchronize()
print(json.dumps({"bytes": n, "seconds": time.perf_counter() - t0}))
"""


def drop_caches() -> bool:
    """Drop the page cache (root on Linux only); True when it worked."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def write_checkpoint(folder: str, gib: float, shard_gib: float = 2.0) -> int:
    """Write ``gib`` GiB of bf16 tensors of Llama-3-8B layer shapes in shards of at most ``shard_gib`` GiB and
    the ``model.safetensors.index.json``; returns bytes written."""
    os.makedirs(folder, exist_ok=True)
    shapes = [("q_proj", (4096, 4096)), ("k_proj", (1024, 4096)), ("v_proj", (1024, 4096)), ("o_proj", (4096, 4096)),
              ("gate_proj", (14336, 4096)), ("up_proj", (14336, 4096)), ("down_proj", (4096, 14336))]
    rng = np.random.default_rng(0)
    block = rng.standard_normal(1 << 22).astype(np.float32)
    total, shard, shard_bytes, weight_map, n_shard = 0, {}, 0, {}, 0

    def flush():
        nonlocal shard, shard_bytes, n_shard
        if shard:
            n_shard += 1
            name = f"model-{n_shard:05d}.safetensors"
            nbx.save_file(shard, os.path.join(folder, name))
            for k in shard:
                weight_map[k] = name
            shard, shard_bytes = {}, 0

    layer = 0
    while total < gib * 2 ** 30:
        for nm, shp in shapes:
            n = shp[0] * shp[1]
            data = np.resize(block, n).reshape(shp)
            t = nbx.tensor(data).to(nbx.bfloat16)
            if shard_bytes + t.nbytes > shard_gib * 2 ** 30:
                flush()
            shard[f"model.layers.{layer}.mlp.{nm}.weight"] = t
            shard_bytes += t.nbytes
            total += t.nbytes
        layer += 1
    flush()
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--dir", default="/tmp/nbx_ckpt")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rows = []
    t0 = time.perf_counter()
    nbytes = write_checkpoint(a.dir, a.gib)
    dt = time.perf_counter() - t0
    rows.append({"row": "write", "GB": nbytes / 1e9, "seconds": dt, "GB/s": nbytes / 1e9 / dt})
    for rep in range(a.reps):
        cold = drop_caches()
        sd = load_checkpoint(a.dir, device=a.device)
        st = sd.stats
        rows.append({"row": f"load.{a.device}", "rep": rep, "cache": "cold" if cold else "warm", "GB": st.nbytes / 1e9,
                     "seconds": st.seconds, "GB/s": st.nbytes / 1e9 / st.seconds, "staging": st.staging,
                     "overlapped": st.overlapped, "tensors": st.tensors})
        del sd
    if not a.no_peer:
        cold = drop_caches()
        try:
            p = subprocess.run([sys.executable, "-c", PEER, a.dir, a.device], capture_output=True, text=True,
                               timeout=600)
            r = json.loads(p.stdout.strip().splitlines()[-1])
            rows.append({"row": "peer.safetensors.torch", "cache": "cold" if cold else "warm", "GB": r["bytes"] / 1e9,
                         "seconds": r["seconds"], "GB/s": r["bytes"] / 1e9 / r["seconds"]})
        except Exception as e:  # the peer is optional: say why it is missing
            rows.append({"row": "peer.safetensors.torch", "error": f"{type(e).__name__}: {e}"[:300]})
    for r in rows:
        print(json.dumps(r))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "load.json"), "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
