"""The model steps of ``nbx demo``: all-MiniLM-L6-v2 sentence embeddings (:func:`run_embeddings`).

Each step prints what it computed and hands its reference checks to the demo's ``check(ok, what)`` callback, so
the demo's summary counts them and its exit status reflects them. A missing model package or ``tokenizers`` is
a failed check with the install command, not a traceback.
"""

from __future__ import annotations

import json
import time

import numpy as np

__all__ = ["run_embeddings", "EMBED_COSINE_MIN"]

# Reference thresholds (issue 7): float32 against sentence-transformers' float32; 16-bit types on a GPU.
EMBED_COSINE_MIN = {"float32": 0.99999, "float16": 0.999, "bfloat16": 0.999}


def _cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _sync(nbx, device: str) -> None:
    if device.startswith("cuda"):
        nbx.cuda.synchronize()


def run_embeddings(device: str, check) -> None:
    """Embed a few sentences with all-MiniLM-L6-v2 on ``device``, print their cosine-similarity matrix and the
    time per sentence, and check the embeddings of the committed reference sentences against
    sentence-transformers' (cosine >= 0.99999 in float32; on CUDA also float16 and bfloat16 >= 0.999).

    Args:
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
        check: ``check(ok: bool, what: str)``, called once per reference check (and once with ``False`` when the
            model cannot be loaded).
    """
    import nbxtensor as nbx
    from ..models.sentence import SentenceEncoder
    from ..models.weights import MINILM_REFERENCE, default_embedding_model

    try:
        path = default_embedding_model()
        t0 = time.perf_counter()
        enc = SentenceEncoder(path, device=device, dtype="float32")
        load_s = time.perf_counter() - t0
    except (FileNotFoundError, ModuleNotFoundError, ValueError) as e:
        check(False, f"all-MiniLM-L6-v2 could not be loaded: {e}")
        return
    ref = json.loads(MINILM_REFERENCE.read_text(encoding="utf-8"))
    sentences = ref["sentences"][:4]
    c = enc.encoder.config
    print(f"  all-MiniLM-L6-v2 (BERT: {c.num_hidden_layers} layers, width {c.hidden_size}, "
          f"{'+'.join(enc.pooling.modes)} pooling{', normalized' if enc.normalize else ''}) on {device}, float32; "
          f"loaded in {load_s:.2f} s")

    enc.encode(sentences)  # warm-up: compiles the kernels on a GPU
    _sync(nbx, device)
    t0 = time.perf_counter()
    emb = enc.encode(sentences)
    _sync(nbx, device)
    ms = (time.perf_counter() - t0) * 1e3
    sim = (emb @ emb.T).float().cpu().numpy()  # rows are normalised: the Gram matrix is the cosine matrix
    width = max(len(s) for s in sentences)
    print("  cosine similarity:")
    print("  " + " " * (width + 5) + " ".join(f"{f'[{j}]':>6}" for j in range(len(sentences))))
    for i, s in enumerate(sentences):
        print(f"  [{i}] {s:<{width}} " + " ".join(f"{sim[i, j]:6.3f}" for j in range(len(sentences))))
    print(f"  {len(sentences)} sentences in {ms:.1f} ms ({ms / len(sentences):.1f} ms per sentence, one batch)")

    expected = np.asarray(ref["embeddings"], dtype=np.float64)
    gen = ref["generator"]
    gpu = device.startswith("cuda")
    dtypes = ["float32"] + (["float16", "bfloat16"] if gpu else [])
    # padded batches on a GPU; one sentence at a time on the CPU, where padding the short sentences to the
    # 256-token one would cost seconds (the similarity batch above is padded)
    batch = ref["batch_size"] if gpu else 1
    for dt in dtypes:
        e = enc if dt == "float32" else SentenceEncoder(path, device=device, dtype=dt)
        got = e.encode(ref["sentences"], batch_size=batch).float().cpu().numpy()
        cos = _cosine_rows(got, expected)
        lo = float(cos.min())
        check(bool(lo >= EMBED_COSINE_MIN[dt]),
              f"MiniLM {dt} on {device}: {len(cos)} reference sentences (up to {ref['max_seq_length']} tokens) "
              f"vs sentence-transformers {gen['sentence-transformers']} on PyTorch {gen['torch']}: min cosine "
              f"{lo:.7f} (needs >= {EMBED_COSINE_MIN[dt]})")
