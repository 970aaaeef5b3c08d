"""Peer probe (uses torch; the library never does): which backend PyTorch's SDPA runs for the prefill rows of issue 5
on this GPU, and how fast each backend is.

For bfloat16, batch 1, 32 heads, head dim 128, 4096 and 16384 tokens, causal and not, it times
``torch.nn.functional.scaled_dot_product_attention`` with PyTorch's default choice and under
``torch.nn.attention.sdpa_kernel`` restricted to each backend (FLASH_ATTENTION, EFFICIENT_ATTENTION,
CUDNN_ATTENTION); a backend that refuses the inputs is reported as such. TFLOP/s count ``4 * B * H * pairs * D``
(causal: the visible pairs, ``L (L + 1) / 2``), as the library's cost declaration does. The default's backend is
named by matching its output bytes to the single-backend runs'. CUDA events, median of 20 runs after 5 warm-ups.

    python3 benchmarks/probe_peer_sdpa.py          # on the GPU machine, with torch installed
"""
from __future__ import annotations

import statistics
import sys


def main() -> int:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, cuDNN {torch.backends.cudnn.version()}")
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                "cudnn": SDPBackend.CUDNN_ATTENTION}
    for L in (4096, 16384):
        for causal in (False, True):
            g = torch.Generator(device="cuda").manual_seed(L + causal)
            q, k, v = (torch.randn(1, 32, L, 128, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
            pairs = L * (L + 1) // 2 if causal else L * L
            flops = 4 * 32 * pairs * 128
            outs, cells = {}, []
            for name, be in [("default", None)] + list(backends.items()):
                def run():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                try:
                    if be is None:
                        fn = run
                    else:
                        def fn(be=be):
                            with sdpa_kernel([be]):
                                return run()
                    for _ in range(5):
                        o = fn()
                    ts = []
                    for _ in range(20):
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        s.record()
                        fn()
                        e.record()
                        e.synchronize()
                        ts.append(s.elapsed_time(e))
                    ms = statistics.median(ts)
                    outs[name] = o
                    cells.append(f"{name} {flops / ms / 1e9:6.1f} TFLOP/s ({ms:.3f} ms)")
                except RuntimeError as err:
                    cells.append(f"{name} refused ({str(err).splitlines()[0][:60]})")
            same = [n for n in backends if n in outs and "default" in outs and torch.equal(outs[n], outs["default"])]
            print(f"{L // 1024}k{' causal' if causal else ''}: " + "; ".join(cells) +
                  f"; default's bytes equal: {', '.join(same) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
