"""Sweep of the prefill attention kernel's settings (``sdpa_fwd`` in runtime/configs/sm90.json) on the GPU.

For bf16, head dim 128, batch 2, 32 heads, 4096 and 16384 tokens (query length = key length), causal and not,
each candidate setting (``BLOCK_M``, ``BLOCK_N``, ``num_warps``, ``num_stages``, the warp-specialized variant
``WARP_SPEC`` with ``ws_warps``/``ws_stages``, and the kernel switches ``FAST_EXP``/``FOLD_SCALE``) is laid over
the table's rule with :func:`nbxtensor.runtime.configs.override` and timed through the public
``nn.functional.scaled_dot_product_attention`` with CUDA events and an L2 flush before every run
(benchmarks/harness.py: ``run_benchmark``, ``percentiles``). The first call of each variant is checked against
the table's own setting (variant ``table``, run first) on the whole output, and the table's output against the
float64 oracle on sampled rows; a mismatch is marked, never hidden. Every exception is recorded per variant and
the sweep goes on. TFLOP/s come from the op's cost declaration (``4 * B * H * pairs * D``; causal counts the
visible pairs, about half); the host cost is the wall time per call of back-to-back calls that do not wait for
the GPU. PyTorch's SDPA is timed on the same inputs in a separate process (benchmarks/peer_torch.py, the peer
protocol of bench_ops.py: this process never imports torch) and the ratio ``torch_ms / ours_ms`` is shown
(above 1: nbxtensor faster). The sweep stops starting work when ``--budget-s`` (default 120 s, compiles
included) would be exceeded.

Run on the H200 from the source tree::

    PYTHONPATH=src python3 benchmarks/sweep_attention.py --out $OUT/sweep --budget-s 120

Smoke test on a host without a GPU (the interpreter runs the same variants on tiny shapes)::

    NBX_TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/sweep_attention.py --device cpu --smoke --out /tmp/sw

Writes ``DIR/sweep_attention.csv`` (one row per variant and shape) and prints a table (one line per variant:
TFLOP/s and the ratio to PyTorch per shape), the best variant per shape and the sm90.json rule it suggests.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep_common as SC  # noqa: E402  (puts src on the path)

import numpy as np  # noqa: E402

import harness as H  # noqa: E402

OP = "scaled_dot_product_attention"
CFG_OP = "sdpa_fwd"

# (batch, heads, tokens, head dim), causal: the prefill rows.
SHAPES = [((2, 32, 4096, 128), False), ((2, 32, 4096, 128), True), ((2, 32, 16384, 128), False),
          ((2, 32, 16384, 128), True)]
SMOKE_SHAPES = [((1, 1, 40, 128), False), ((1, 1, 40, 128), True)]

_PLAIN = dict(TMA=True, WARP_SPEC=False, FAST_EXP=True, FOLD_SCALE=True)
_WS = dict(TMA=True, WARP_SPEC=True, FAST_EXP=True, FOLD_SCALE=True)


def _v(name, **s):
    return name, s


# Most promising first (the budget cuts the tail). "table" is the rule as it stands: the reference for the output
# check. "as before" approximates the kernel before FAST_EXP/FOLD_SCALE (IEEE exp2, scale multiplied first).
# Shared memory per CTA from ahead-of-time sm90 compiles (limit 227 KB): m128 n128 s2 161 KB, s3 225 KB; m128 n64
# s3 129 KB, s4 161 KB; ws m128 n128 s2 162 KB, s3 226 KB (12 warps: a producer group and two consumer groups);
# none spills. Triton 3.6 specializes only kernels launched with 4 warps (ws_warps=4).
VARIANTS = [
    _v("table"),
    # session 9: the warp-specialized variant stores through a descriptor (its pointer store wrote wrong rows under
    # Triton 3.6's warp specialization: benchmarks/probe_ws_attention.py); 128-row tiles first
    _v("ws m128 n128 s2", BLOCK_M=128, BLOCK_N=128, ws_warps=4, ws_stages=2, **_WS),
    # session 10: the causal split (the variant over each tile's unmasked keys, the plain kernel over the diagonal
    # from its float32 partials); without the causal mask it is the variant itself. H200, --rounds 2, batch 2:
    # 4k causal 363/347 TFLOP/s against the table's 407/400, 16k causal 501/487 against 478/476. Tried and
    # removed: the grid with the query tiles on its slow axis (every head's longest causal tiles first): causal
    # 408/380 against 407/400, and 430/407 against 556/548 without the mask (K/V no longer shared in L2).
    # Plain tiles for short causal prompts (--batch 1 --causal-only --tokens 4096,8192 --rounds 2): the table's
    # m128 n128 w8 s3 377/378 and 455-458 TFLOP/s; m128 n64 s3 357/356, 426-431; m128 n64 s4 352-354, 424-429;
    # m64 n64 s2 347-351, 408-411; m64 n128 s2 286, 324-326
    _v("ws split m128 n128 s2", BLOCK_M=128, BLOCK_N=128, ws_warps=4, ws_stages=2, num_warps=8, num_stages=3,
       CAUSAL_SPLIT=True, **_WS),
    _v("ws m128 n128 s2 plainmax", BLOCK_M=128, BLOCK_N=128, ws_warps=4, ws_stages=2, PLAIN_MAX=True, **_WS),
    _v("ws m128 n64 s3", BLOCK_M=128, BLOCK_N=64, ws_warps=4, ws_stages=3, **_WS),
    _v("ws m128 n64 s4", BLOCK_M=128, BLOCK_N=64, ws_warps=4, ws_stages=4, **_WS),
    _v("ws m128 n128 s3", BLOCK_M=128, BLOCK_N=128, ws_warps=4, ws_stages=3, **_WS),
    _v("ws m128 n128 s2 ieee-exp", BLOCK_M=128, BLOCK_N=128, ws_warps=4, ws_stages=2, **dict(_WS, FAST_EXP=False)),
    _v("ws m128 n128 s2 nofold", BLOCK_M=128, BLOCK_N=128, ws_warps=4, ws_stages=2, **dict(_WS, FOLD_SCALE=False)),
    _v("m128 n128 w8 s3 plainmax", BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=3, PLAIN_MAX=True, **_PLAIN),
    _v("ws m64 n128 s2", BLOCK_M=64, BLOCK_N=128, ws_warps=4, ws_stages=2, **_WS),
    _v("ws m64 n64 s3", BLOCK_M=64, BLOCK_N=64, ws_warps=4, ws_stages=3, **_WS),
    _v("m128 n128 w8 s2 as before", BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2, **dict(
        _PLAIN, FAST_EXP=False, FOLD_SCALE=False)),
    _v("m128 n64 w8 s3", BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, **_PLAIN),
    _v("m128 n128 w8 s3", BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=3, **_PLAIN),
    _v("m128 n64 w8 s4", BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=4, **_PLAIN),
    _v("m128 n64 w8 s2", BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2, **_PLAIN),
    _v("m64 n64 w4 s2", BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2, **_PLAIN),  # 80 KB: 2 CTAs per SM
    _v("m64 n128 w4 s2", BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=2, **_PLAIN),
    _v("m128 n128 w8 s2 ieee-exp", BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2, **dict(_PLAIN,
                                                                                              FAST_EXP=False)),
    _v("m128 n128 w8 s2 no-fold", BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2, **dict(_PLAIN,
                                                                                             FOLD_SCALE=False)),
]

CSV_COLUMNS = ["run_id", "variant", "settings", "shape", "causal", "status", "check", "max_excess", "p20_ms",
               "p50_ms", "p80_ms", "reps", "flops", "tflops", "pct_peak", "host_us", "peer_p50_ms", "peer_tflops",
               "ratio", "error", "gpu", "commit", "date"]


def label(shape, causal) -> str:
    n = shape[2]
    return (f"{n // 1024}k" if n % 1024 == 0 else str(n)) + ("-causal" if causal else "")


def specs(shape, causal):
    """The three inputs (bit-identical in both processes) and the call, as harness data."""
    ins = [H.InputSpec(tuple(shape), "bfloat16", "normal", seed) for seed in (1, 2, 3)]
    call = H.Call(ins, f"F:{OP}", [H.TensorRef(0), H.TensorRef(1), H.TensorRef(2)],
                  {"is_causal": True} if causal else {}, "bfloat16")
    return call


# ---------------------------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------------------------
def excess(out, ref, vmax: float, tol) -> float:
    """``max(|out - ref| - rtol * |ref|) - (atol + rtol * vmax)`` on the device: <= 0 passes the declared rule
    ``|out - ref| <= atol + rtol * (|ref| + P|V|)`` with ``P|V| <= max|V|``; NaN anywhere gives NaN (fails)."""
    o, r = out.float(), ref.float()
    worst = ((o - r).abs() - tol.rtol * r.abs()).max().item()
    return float(worst) - (tol.atol + tol.rtol * vmax)


def oracle_rows(q, k, v, causal: bool, out, tol) -> float:
    """The worst excess over the declared tolerance of sampled rows (first, second, middle, last; two (batch,
    head) pairs) against the float64 oracle; <= 0 passes."""
    from nbxtensor.dtypes import table as T
    from nbxtensor.dtypes.casting import cast_array
    from nbxtensor.ops.attention import sdpa_oracle
    Z, Hh, L, E = q.shape
    worst = -math.inf
    for z, h in ((0, 0), (Z - 1, Hh - 1)):
        rows = sorted({0, 1, L // 2, L - 1})
        qa = cast_array(np.asarray(q[z, h].cpu().numpy()), T.bfloat16, T.float64)
        ka = cast_array(np.asarray(k[z, h].cpu().numpy()), T.bfloat16, T.float64)
        va = cast_array(np.asarray(v[z, h].cpu().numpy()), T.bfloat16, T.float64)
        oa = cast_array(np.asarray(out[z, h].cpu().numpy()), T.bfloat16, T.float64)
        for i in rows:
            kk, vv = (ka[:i + 1], va[:i + 1]) if causal else (ka, va)
            ref, mag = sdpa_oracle(qa[i:i + 1], kk, vv, with_magnitude=True)
            err = np.abs(oa[i:i + 1] - ref) - (tol.atol + tol.rtol * (np.abs(ref) + mag))
            worst = max(worst, float(np.max(err)) if not np.isnan(err).any() else math.nan)
            if math.isnan(worst):
                return worst
    return worst


# ---------------------------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------------------------
def peer_times(a, dev: str, shapes, timing, out_dir: str, deadline: float) -> tuple[dict, str]:
    """PyTorch's p50 (ms) per shape label from the peer process, and a description of the peer."""
    if a.no_peer:
        return {}, "disabled (--no-peer)"
    from bench_ops import PeerClient
    peer = PeerClient(a.peer_python, os.path.join(out_dir, "peer.log"))
    res: dict = {}
    try:
        info = peer.hello()
        if not info.get("ok"):
            return {}, f"unavailable: {info.get('error')}"
        desc = f"PyTorch {info.get('torch')} ({a.peer_python})"
        for shape, causal in shapes:
            if time.monotonic() > deadline:
                desc += "; stopped by the budget"
                break
            reply = peer.request({"cmd": "bench", "op": OP, "call": specs(shape, causal).to_json(), "device": dev,
                                  "timing": vars(timing)}, timeout=max(30.0, deadline - time.monotonic()))
            res[label(shape, causal)] = reply.get("p50_ms") if reply.get("ok") else None
            if not reply.get("ok"):
                desc += f"; {label(shape, causal)}: {reply.get('error')}"
        return res, desc
    finally:
        peer.close()


# ---------------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------------
def parse_args(argv):
    p = SC.sweep_parser(__doc__, "output folder (sweep_attention.csv is appended to)", budget_s=120.0)
    p.add_argument("--variants", default="", help="comma-separated variant names to run (default: all, in order)")
    p.add_argument("--no-peer", action="store_true", help="do not time PyTorch")
    p.add_argument("--peer-python", default=os.environ.get("NBX_PEER_PYTHON", sys.executable),
                   help="the Python that runs benchmarks/peer_torch.py (default: this one)")
    p.add_argument("--list", action="store_true", help="print the variants and exit")
    p.add_argument("--tokens", default="", help="comma-separated sequence lengths to time instead of 4096,16384 "
                   "(query length = key length), each without and with the causal mask")
    p.add_argument("--causal-only", action="store_true", help="only the causal shapes")
    p.add_argument("--batch", type=int, default=2, help="batch of the shapes (default 2; 32 heads, head dim 128)")
    p.add_argument("--rounds", type=int, default=1,
                   help="run the variant list this many times, every other round in reverse order after 'table' "
                        "(a card that warms up or throttles over the run favours the variants timed first: "
                        "rounds in both orders show it); round r's rows are named 'VARIANT #r'")
    return p.parse_args(argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    budget = SC.Budget(a.budget_s)
    variants = VARIANTS
    if a.variants:
        want = SC.names(a.variants)
        unknown = [w for w in want if w not in dict(VARIANTS)]
        if unknown:
            print(f"sweep_attention: unknown variants {unknown}; known: {[n for n, _ in VARIANTS]}", file=sys.stderr)
            return 2
        variants = [v for v in VARIANTS if v[0] in want or v[0] == "table"]
    if a.list:
        for name, s in variants:
            print(f"{name:28s} {json.dumps(s, sort_keys=True)}")
        return 0
    import nbxtensor as nbx
    import nbxtensor.nn.functional as F
    from nbxtensor.ops import attention as A
    from nbxtensor.ops import registry
    from nbxtensor.ops.attention import attention_tolerance
    from nbxtensor.runtime.configs import launch_config
    dev = a.device
    st = SC.start("sweep_attention", nbx, dev, a.out, a.smoke, warmup_ms=10.0, rep_ms=60.0, min_reps=3, max_reps=60,
                  smoke_rep_ms=0.0, smoke_max_reps=1, utc=True, hint="use --device cpu --smoke")
    if st is None:
        return 2
    facts, timing, clock, run_id, commit, date = st.facts, st.timing, st.clock, st.run_id, st.commit, st.date
    shapes = SMOKE_SHAPES if a.smoke else SHAPES
    if not a.smoke and (a.tokens or a.batch != 2):
        tokens = [int(t) for t in a.tokens.split(",")] if a.tokens else [4096, 16384]
        shapes = [((a.batch, 32, n, 128), c) for n in tokens for c in (False, True)]
    if a.causal_only:
        shapes = [sc for sc in shapes if sc[1]]
    peaks = {}
    if dev != "cpu":
        from bench_ops import FACTS_DIR, PEAKS_FILE
        peaks = H.load_peaks(facts["gpu"], facts["arch"], FACTS_DIR, PEAKS_FILE)
    peak_tf = H.peak_tflops_for(peaks, "bfloat16") if peaks else None
    rec = registry.get(OP)
    tol = attention_tolerance(nbx.bfloat16, 128)

    # PyTorch first (its own process), so the ratio exists even when the budget cuts the variant list short.
    peer, peer_desc = peer_times(a, dev, shapes, timing, a.out, budget.until(0.3))
    print(f"sweep_attention: {facts['gpu']} ({facts.get('arch')}), commit {commit}; budget {a.budget_s:.0f} s; "
          f"peer: {peer_desc} ({budget.elapsed():.0f} s)", flush=True)
    base_rule = launch_config(CFG_OP, nbx.device(dev), dtypes=(nbx.bfloat16,), head_dim=128, q_len=shapes[0][0][2],
                              causal=1)
    print(f"table rule for bf16 hd128 (non-causal): {json.dumps(base_rule, sort_keys=True)}", flush=True)

    inputs = {}
    for shape, causal in shapes:
        if shape not in inputs:
            call = specs(shape, causal)
            ts = [nbx.from_numpy(H.host_array(s)) for s in call.inputs]
            inputs[shape] = [t.to(dev) for t in ts] if dev != "cpu" else ts
    vmax = {shape: max(float(t.float().abs().max().item()) for t in ins[2:]) for shape, ins in inputs.items()}
    refs: dict = {}
    rows: list = []
    results: dict = {}  # variant -> label -> row
    stopped = None
    order = []
    for r in range(max(1, a.rounds)):  # 'table' first in every round: the reference of the output checks
        seq = variants if r % 2 == 0 else variants[:1] + variants[:0:-1]
        order += [(name if r == 0 else f"{name} #{r + 1}", settings) for name, settings in seq]
    for name, settings in order:
        if stopped:
            break
        for shape, causal in shapes:
            lab = label(shape, causal)
            if not budget.allows(lab):  # the last (variant, shape) pair's cost as the estimate
                stopped = f"budget: stopped before {name} / {lab} ({budget.elapsed():.0f} s)"
                break
            q, k, v = inputs[shape]
            if a.smoke:  # the interpreter: the same code paths with tiles of at most 32 (seconds, not minutes)
                settings = {k_: (min(v_, 32) if k_ in ("BLOCK_M", "BLOCK_N") else v_) for k_, v_ in settings.items()}
            row = {"run_id": run_id, "variant": name, "settings": json.dumps(settings, sort_keys=True),
                   "shape": H.shape_str(shape), "causal": causal, "gpu": facts["gpu"], "commit": commit, "date": date}
            flops = rec.cost(q, k, v, is_causal=causal).flops
            row["flops"] = flops
            fn = (lambda q=q, k=k, v=v, causal=causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            ts = time.monotonic()
            try:
                A._TMA_BROKEN.clear()  # the op remembers kernels that failed to compile: each pair tries its own
                A._WS_BROKEN.clear()
                with SC.laid_over(CFG_OP, settings):
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        out = fn()  # compiles
                        if dev != "cpu":
                            nbx.cuda.synchronize()
                    fell = [str(w.message) for w in caught if "failed" in str(w.message)]
                    if fell:  # the op fell back to another kernel: the timing would not be this variant's
                        raise RuntimeError("fell back: " + fell[0])
                    if name.split(" #")[0] == "table":
                        refs[lab] = out
                        worst = oracle_rows(q, k, v, causal, out, tol)
                        row["check"] = "oracle ok" if worst <= 0 else "ORACLE MISMATCH"
                    elif lab in refs:
                        worst = excess(out, refs[lab], vmax[shape], tol)
                        row["check"] = "ok" if worst <= 0 else "MISMATCH"
                    else:
                        worst, row["check"] = math.nan, "no reference"
                    row["max_excess"] = worst
                    del out
                    times = H.run_benchmark(fn, clock, timing)
                    row["host_us"] = SC.host_cost_us(nbx, fn, dev, 2 if a.smoke else 10)
                p20, p50, p80 = H.percentiles(times)
                r = H.rates(flops, 0, p50, None, peak_tf)
                row.update(status="ok", p20_ms=p20, p50_ms=p50, p80_ms=p80, reps=len(times), tflops=r["tflops"],
                           pct_peak=r["pct_peak_flops"])
                pm = peer.get(lab)
                if pm:
                    row.update(peer_p50_ms=pm, peer_tflops=flops / (pm * 1e-3) / 1e12, ratio=pm / p50)
            except Exception as e:  # noqa: BLE001 - one failing variant never stops the sweep
                row.update(status="error", error=SC.error_text(e))
                SC.log_traceback(os.path.join(a.out, "sweep_attention.log"), f"{name} / {lab}")
            budget.record(lab, ts)  # the next variant's estimate for this shape
            rows.append(row)
            results.setdefault(name, {})[lab] = row
            H.append_csv(os.path.join(a.out, "sweep_attention.csv"), [row], CSV_COLUMNS)
    print_table(results, shapes, peer, peak_tf, stopped, budget.elapsed())
    return 0


def print_table(results: dict, shapes, peer: dict, peak_tf, stopped, elapsed: float) -> None:
    labs = [label(s, c) for s, c in shapes]
    w = 17
    errors: dict = {}
    print("\nTFLOP/s (ratio to PyTorch SDPA; >1: nbxtensor faster); ! = output check failed, E = error")
    print(f"{'variant':30s}" + "".join(f"{lab:>{w}s}" for lab in labs) + f"{'host us':>10s}")
    if peer:
        cells = []
        for s, c in shapes:
            lab = label(s, c)
            pm = peer.get(lab)
            row = next((r.get(lab) for r in results.values() if r.get(lab) and r[lab].get("flops")), None)
            cells.append(f"{row['flops'] / (pm * 1e-3) / 1e12:8.1f}" if pm and row else "-")
        print(f"{'PyTorch SDPA':30s}" + "".join(f"{c:>{w}s}" for c in cells))
    for name, per in results.items():
        cells = []
        host = []
        for lab in labs:
            r = per.get(lab)
            if r is None:
                cells.append("")
                continue
            if r.get("status") != "ok":
                err = r.get("error") or ""
                cells.append("E fallback" if "fell back" in err else "E " + err.split(":")[0][:w - 3])
                errors.setdefault(name, err)
                continue
            mark = "" if r.get("check") in ("ok", "oracle ok") else "!"
            ratio = f" ({r['ratio']:.2f}x)" if r.get("ratio") else ""
            cells.append(f"{mark}{r['tflops']:.1f}{ratio}")
            host.append(r.get("host_us") or 0.0)
        hu = f"{np.median(host):10.1f}" if host else ""
        print(f"{name[:30]:30s}" + "".join(f"{c:>{w}s}" for c in cells) + hu)
    for name, err in errors.items():
        m = re.search(r"kernel failed \((.*?)\); using", err)
        print(f"  E {name}: {('fell back to another kernel: ' + m.group(1)) if m else err}"[:118])
    print("\nbest per shape (checked variants only):")
    best = {}
    for lab in labs:
        ok = [(r["p50_ms"], n) for n, per in results.items() for r in [per.get(lab)]
              if r and r.get("status") == "ok" and r.get("check") in ("ok", "oracle ok")]
        if ok:
            ms, n = min(ok)
            best[lab] = n
            r = results[n][lab]
            pct = f", {r['pct_peak']:.0f}% of peak" if r.get("pct_peak") else ""
            ratio = f", {r['ratio']:.2f}x PyTorch" if r.get("ratio") else ""
            print(f"  {lab:12s} {n:30s} {r['tflops']:.1f} TFLOP/s{pct}{ratio}  {r['settings']}")
    for flag, lbls in (("non-causal", [lb for lb in labs if "causal" not in lb]),
                       ("causal", [lb for lb in labs if "causal" in lb])):
        names = {best.get(lb) for lb in lbls} - {None}
        if len(names) == 1:
            n = names.pop()
            s = json.loads(results[n][lbls[0]]["settings"]) if n.split(" #")[0] != "table" else \
                "(the table's rule as it stands)"
            print(f"suggested sm90.json rule for bf16 hd128 {flag}: {json.dumps(s) if isinstance(s, dict) else s}"
                  + ("  [bound it with \"max_causal\": 1 or list it before the causal rule]" if flag == "non-causal"
                     and isinstance(s, dict) else ""))
    if stopped:
        print(stopped)
    print(f"done in {elapsed:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
