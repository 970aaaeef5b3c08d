"""Probe: which feature of nbxtensor's attention kernel makes Triton 3.6's Hopper warp specialization compute wrong
rows (H200).

Session 8 (sweep_attention.py --ws-on-gpu): the warp-specialized variant of ``ops.attention._attn_fwd_kernel``
with 128-row query tiles runs 552-575 TFLOP/s against the plain kernel's 477-492 (bf16, head dim 128, 4k and 16k
keys) but computes wrong rows (NaN excess against the plain kernel); with 64-row tiles it is right and slow
(239-283 TFLOP/s). Neither the inline-PTX exp2 (``FAST_EXP``), the folded scale (``FOLD_SCALE``) nor the
NaN-propagating maximum (``PLAIN_MAX``) is the cause. Triton splits a 128-row tile between two consumer warp
groups (data partitioning), so the suspects are what the kernel does per row around the loop.

This probe is a minimal FlashAttention forward (non-causal, no mask, contiguous ``[Z, H, L, D]`` bf16, every
load and the store through tensor descriptors, the loop body inline: the form of Triton's fused-attention
tutorial) with one switch per feature the library's kernel adds:

- ``GUARD``: the shift ``where(m == -inf, 0, m)`` (a row with no visible key so far);
- ``SAFE_EPI``: the epilogue ``acc * rcp_rn(where(l == 0, 1, l))`` instead of ``acc / l``;
- ``PTR_STORE``: the output stored through pointers instead of a descriptor;
- ``HELPER``: the loop body in a separate ``@jit`` function (as ``_attn_inner``/``_fold_tile``);
- ``L_ZERO``: ``l`` starts at 0 (the library) instead of 1 (the tutorial; the first rescale multiplies it by 0);
- ``CAUSAL`` (session 9, after the descriptor store fixed the non-causal kernel while the library's causal one
  stayed wrong): the diagonal mask on every tile of one loop (as ``-inf`` or as the tutorial's ``-1e6`` bias), or
  the tutorial's two loops (the tiles left of the diagonal unmasked, then the diagonal tile masked).

Findings (session 9, H200, Triton 3.6): the pointer store alone breaks the tutorial kernel (most rows wrong,
varying per run), so the library's variant stores through a descriptor and runs without the causal mask. Every
causal form stays wrong or fails: the diagonal mask on every tile, as ``-inf``, as a bias, or as a tile loaded
through a descriptor, leaves rows 64-127 of each 128-row tile wrong; the two-loop forms fail Triton's pass
manager. See ``ops.attention.ws_verified``.

Each variant runs with ``warp_specialize`` on and off; its output is compared with the float64 oracle on the
rows of two (batch, head) pairs, and the first wrong row (mod 128) is printed: a wrong second half (64-127) is
the data-partitioning symptom. Then TFLOP/s with CUDA events and an L2 flush (benchmarks/harness.py).

    PYTHONPATH=src python3 benchmarks/probe_ws_attention.py              # on the H200
    NBX_TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/probe_ws_attention.py --device cpu --smoke
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
import nbxtensor as nbx  # noqa: E402
from nbxtensor.ops.attention import LOG2E, _operand, _round_p, sdpa_oracle  # noqa: E402
from nbxtensor.runtime.launcher import interpreting  # noqa: E402
from nbxtensor.ops.triton_helpers import rcp_rn  # noqa: E402
from nbxtensor.runtime.launcher import launch  # noqa: E402
from nbxtensor.runtime.triton_compat import jit, tl  # noqa: E402

SWITCHES = ("GUARD", "SAFE_EPI", "PTR_STORE", "HELPER", "L_ZERO")


@jit
def _step(q, k_desc, v_desc, m_desc, start_n, start_m, offs_m, offs_n, m_i, l_i, acc, qk_scale,
          GUARD: tl.constexpr, MASK: tl.constexpr, UPCAST: tl.constexpr, BLOCK_N: tl.constexpr):
    k = _operand(k_desc.load([start_n, 0]).T, UPCAST)
    qk = tl.dot(q, k)
    if MASK == 6:    # the diagonal as a loaded tile (1: masked); columns left of the strip arrive as 0 (visible)
        qk = tl.where(m_desc.load([0, start_n - start_m + BLOCK_N]) != 0, float("-inf"), qk)
    elif MASK == 1:    # the library's: masked scores are -inf
        qk = tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], qk, float("-inf"))
    elif MASK == 3:  # the tutorial's: a large negative bias
        qk = qk + tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], 0.0, -1.0e6)
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    if GUARD:
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        shift = m_new
    p = tl.math.exp2(qk * qk_scale - shift[:, None])
    alpha = tl.math.exp2(m_i - shift)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = _operand(v_desc.load([start_n, 0]), UPCAST)
    acc = tl.dot(_round_p(p, tl.bfloat16, UPCAST), v, acc)
    return m_new, l_i, acc


@jit
def _keys(q, k_desc, v_desc, m_desc, lo, hi, start_m, m_i, l_i, acc, qk_scale, BLOCK_M: tl.constexpr,
          BLOCK_N: tl.constexpr, WS: tl.constexpr, GUARD: tl.constexpr, HELPER: tl.constexpr, MASK: tl.constexpr,
          UPCAST: tl.constexpr):
    """Fold key tiles ``[lo, hi)``; ``MASK``: 0 none, 1 the causal diagonal as ``-inf``, 3 as a ``-1e6`` bias, 6
    as ``-inf`` where a tile loaded through ``m_desc`` (a ``[BLOCK_M, 3 BLOCK_N]`` uint8 strip, 1 above the
    diagonal) says so."""
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        if HELPER:
            m_i, l_i, acc = _step(q, k_desc, v_desc, m_desc, start_n, start_m, offs_m, offs_n, m_i, l_i, acc,
                                  qk_scale, GUARD, MASK, UPCAST, BLOCK_N)
        else:  # _step's body written inline on purpose: HELPER compares the two forms under warp specialization
            k = _operand(k_desc.load([start_n, 0]).T, UPCAST)
            qk = tl.dot(q, k)
            if MASK == 6:
                qk = tl.where(m_desc.load([0, start_n - start_m + BLOCK_N]) != 0, float("-inf"), qk)
            elif MASK == 1:
                qk = tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], qk, float("-inf"))
            elif MASK == 3:
                qk = qk + tl.where(offs_m[:, None] >= (start_n + offs_n)[None, :], 0.0, -1.0e6)
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            if GUARD:
                shift = tl.where(m_new == float("-inf"), 0.0, m_new)
            else:
                shift = m_new
            p = tl.math.exp2(qk * qk_scale - shift[:, None])
            alpha = tl.math.exp2(m_i - shift)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None]
            v = _operand(v_desc.load([start_n, 0]), UPCAST)
            acc = tl.dot(_round_p(p, tl.bfloat16, UPCAST), v, acc)
            m_i = m_new
    return m_i, l_i, acc


@jit
def _probe_kernel(Q, K, V, O, MT, L, qk_scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
                  WS: tl.constexpr, GUARD: tl.constexpr, SAFE_EPI: tl.constexpr, PTR_STORE: tl.constexpr,
                  HELPER: tl.constexpr, L_ZERO: tl.constexpr, UPCAST: tl.constexpr, CAUSAL: tl.constexpr = 0):
    start_m = tl.program_id(0) * BLOCK_M
    base = tl.program_id(1).to(tl.int64) * L * D
    q_desc = tl.make_tensor_descriptor(Q + base, shape=[L, D], strides=[D, 1], block_shape=[BLOCK_M, D])
    k_desc = tl.make_tensor_descriptor(K + base, shape=[L, D], strides=[D, 1], block_shape=[BLOCK_N, D])
    v_desc = tl.make_tensor_descriptor(V + base, shape=[L, D], strides=[D, 1], block_shape=[BLOCK_N, D])
    m_desc = tl.make_tensor_descriptor(MT, shape=[BLOCK_M, 3 * BLOCK_N], strides=[3 * BLOCK_N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N])
    q = _operand(q_desc.load([start_m, 0]), UPCAST)   # UPCAST: the interpreter's dot misreads bf16
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    if L_ZERO:
        l_i = tl.zeros([BLOCK_M], tl.float32)
    else:
        l_i = tl.full([BLOCK_M], 1.0, tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    if CAUSAL == 0:
        m_i, l_i, acc = _keys(q, k_desc, v_desc, m_desc, 0, L, start_m, m_i, l_i, acc, qk_scale, BLOCK_M, BLOCK_N,
                              WS, GUARD, HELPER, 0, UPCAST)
    elif CAUSAL == 2 or CAUSAL == 4 or CAUSAL == 5:  # the tutorial's form: the tiles left of the diagonal
        # unmasked, then the diagonal's (2: masked scores -inf; 4: the tutorial's -1e6 bias; 5: as 2, the diagonal's
        # loop not warp-specialized)
        m_i, l_i, acc = _keys(q, k_desc, v_desc, m_desc, 0, start_m, start_m, m_i, l_i, acc, qk_scale, BLOCK_M,
                              BLOCK_N, WS, GUARD, HELPER, 0, UPCAST)
        m_i, l_i, acc = _keys(q, k_desc, v_desc, m_desc, start_m, start_m + BLOCK_M, start_m, m_i, l_i, acc, qk_scale,
                              BLOCK_M, BLOCK_N, WS and CAUSAL != 5, GUARD, HELPER, 3 if CAUSAL == 4 else 1, UPCAST)
    else:  # one loop with the diagonal mask on every tile (the library's warp-specialized form): 1 where, 3 add,
        # 6 a loaded mask tile
        m_i, l_i, acc = _keys(q, k_desc, v_desc, m_desc, 0, start_m + BLOCK_M, start_m, m_i, l_i, acc, qk_scale,
                              BLOCK_M, BLOCK_N, WS, GUARD, HELPER, CAUSAL, UPCAST)
    if SAFE_EPI:
        out = acc * rcp_rn(tl.where(l_i == 0.0, 1.0, l_i))[:, None]
    else:
        out = acc / l_i[:, None]
    if PTR_STORE:
        rows = (start_m + tl.arange(0, BLOCK_M)).to(tl.int64)
        tl.store(O + base + rows[:, None] * D + tl.arange(0, D)[None, :], out.to(tl.bfloat16))
    else:
        o_desc = tl.make_tensor_descriptor(O + base, shape=[L, D], strides=[D, 1], block_shape=[BLOCK_M, D])
        o_desc.store([start_m, 0], out.to(tl.bfloat16))


CAUSAL_FORMS = {"causal-where": 1, "causal-2loop": 2, "causal-add": 3, "causal-2loop-add": 4,
                "causal-2loop-diag-plain": 5, "causal-mask-tile": 6}


def variants() -> list[tuple[str, dict]]:
    """The tutorial form first, then each switch alone, then all of them (the library's form), then the causal
    forms (``CAUSAL``: 1 one loop with the diagonal mask as ``-inf`` on every tile, the library's warp-specialized
    form; 3 the same as a ``-1e6`` bias; 2 and 4 the tutorial's two loops, the diagonal tile masked; 5 as 2 with only
    the first loop warp-specialized; 6 one loop, the diagonal mask a uint8 tile loaded through a descriptor)."""
    out = [("tutorial", {})]
    out += [(s.lower(), {s: True}) for s in SWITCHES]
    out.append(("all", {s: True for s in SWITCHES}))
    out += [(name, {"CAUSAL": c}) for name, c in CAUSAL_FORMS.items()]
    out.append(("causal-where-guard-helper", {"CAUSAL": 1, "GUARD": True, "HELPER": True}))
    return out


def describe(slices: list[tuple[np.ndarray, np.ndarray]], tol: float, block_m: int) -> str:
    """One line on ``(got, want)`` pairs of ``[L, D]`` slices: "ok (max err E)" or the first wrong row, its place in
    its ``block_m`` tile, the count of wrong rows and the largest finite error."""
    bad = [first_wrong_row(g, w, tol) for g, w in slices]
    err = max(float(np.nanmax(np.abs(g - w))) if np.isfinite(g).any() else float("nan") for g, w in slices)
    n = sum(int((~(np.abs(g - w) <= tol)).any(axis=1).sum()) for g, w in slices)
    wrong = [b for b in bad if b is not None]
    if not wrong:
        return f"ok (max err {err:.1e})"
    return f"WRONG row {min(wrong)} (mod {block_m}: {min(wrong) % block_m}), {n} rows, err {err:.1e}"


def first_wrong_row(got: np.ndarray, want: np.ndarray, tol: float) -> int | None:
    """The first query row (of a ``[L, D]`` slice) whose error passes ``tol`` or that holds a NaN; None if none."""
    bad = ~(np.abs(got - want) <= tol)   # NaN compares False: counted as wrong
    rows = np.nonzero(bad.any(axis=1))[0]
    return int(rows[0]) if rows.size else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (the interpreter on the cpu)")
    ap.add_argument("--block-m", type=int, default=128)
    ap.add_argument("--block-n", type=int, default=128)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
    a = ap.parse_args(argv)
    Z, Hh, L, D = (1, 2, 64, 32) if a.smoke else (2, 32, 4096, a.head_dim)
    bm, bn = (32, 32) if a.smoke else (a.block_m, a.block_n)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((Z, Hh, L, D)).astype(np.float32) for _ in range(3))
    T = [nbx.tensor(x, dtype=nbx.bfloat16, device=a.device) for x in (q, k, v)]
    host = [t.cpu().float().numpy().astype(np.float64) for t in T]
    pairs = [(0, 0), (Z - 1, Hh - 1)]
    want = {(p, c): sdpa_oracle(*(h[p[0], p[1]][None, None] for h in host), None, c)[0, 0]
            for p in pairs for c in (False, True)}
    tol = 2e-2   # bf16 output, D <= 128: a few bf16 ulps of values near 1 (a wrong row is off by O(1) or NaN)
    scale = 1.0 / math.sqrt(D)
    flops = 4 * Z * Hh * L * L * D   # causal variants: the visible pairs, L (L + 1) / 2
    chosen = [v for v in variants() if not a.variants or v[0] in a.variants.split(",")]
    clock = None
    if a.device != "cpu":
        from sweep_common import start
        st = start("probe_ws_attention", nbx, a.device, "/tmp/probe_ws_attention", False, warmup_ms=10.0,
                   rep_ms=40.0, min_reps=3, max_reps=40, utc=True, hint="")
        if st is None:
            return 2
        clock, timing = st.clock, st.timing
    print(f"probe_ws_attention: [Z, H, L, D] = {[Z, Hh, L, D]} bf16, BLOCK_M {bm}, BLOCK_N {bn}")
    cases = [(name, sw, ws) for name, sw in chosen for ws in (True, False)]
    # the diagonal strip of MASK 6: column x of row r is masked (1) where key x - BLOCK_N is right of query r
    cols = np.arange(3 * bn)[None, :] - bn
    strip = nbx.tensor((cols > np.arange(bm)[:, None]).astype(np.uint8), device=a.device)
    causal = {name: bool(sw.get("CAUSAL", 0)) for name, sw in chosen}
    runs = {}
    for name, sw, ws in cases:   # noqa: B007
        out = nbx.empty(Z, Hh, L, D, dtype=nbx.bfloat16, device=a.device)
        meta = dict(BLOCK_M=bm, BLOCK_N=bn, D=D, WS=ws, **{s: sw.get(s, False) for s in SWITCHES},
                    CAUSAL=sw.get("CAUSAL", 0), UPCAST=interpreting(), num_warps=4 if ws else 8,
                    num_stages=2 if ws else 3)

        def run(out=out, meta=meta):
            launch(_probe_kernel, (L // bm, Z * Hh), *T, out, strip, L, scale * LOG2E, **meta)
        runs[name, ws] = (run, out)

    def check(name, ws) -> str:
        run, out = runs[name, ws]
        try:
            out.fill_(float("nan"))   # a row the kernel skips reads NaN, not an earlier result
            run()
            got = out.cpu().float().numpy()
        except Exception as e:  # noqa: BLE001 - a probe: report and go on
            return f"E {type(e).__name__}: {str(e).splitlines()[0][:60] if str(e) else ''}"
        return describe([(got[p[0], p[1]], want[p, causal[name]]) for p in pairs], tol, bm)

    def inputs_intact() -> bool:
        return all(np.array_equal(t.cpu().float().numpy().astype(np.float64), h) for t, h in zip(T, host))

    # Three passes, so that a wrong result can be told apart from state left by an earlier variant or by the
    # timing loop (its L2 flush writes a 256 MiB buffer): every check first, then the timings, then every check
    # again with the inputs compared to the host copy.
    first = {c: check(*c) for c in runs}
    tflops = {}
    for c in runs:
        tflops[c] = ""
        if clock is not None and not first[c].startswith("E "):
            p50 = H.percentiles(H.run_benchmark(runs[c][0], clock, timing))[1]
            f = flops * (L + 1) / (2 * L) if causal[c[0]] else flops
            tflops[c] = f"{f / (p50 * 1e-3) / 1e12:8.1f}"
    intact = inputs_intact()
    again = {c: check(*c) for c in runs}
    print(f"inputs unchanged after the timings: {intact}")
    print(f"{'variant':26s} {'ws':>3s}  {'check':44s} {'after timing':44s} {'TFLOP/s':>8s}")
    for name, ws in runs:
        c = (name, ws)
        print(f"{name:26s} {'on' if ws else 'off':>3s}  {first[c]:44s} {again[c]:44s} {tflops[c]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
