"""The suite's second model: a static embedding model distilled offline from all-mpnet-base-v2.

A static model maps each token of the vocabulary to a fixed vector and embeds a text as the mean of
its tokens' vectors (the model2vec recipe, Tulkens & van Dongen 2024): no attention, so it embeds
hundreds of times faster than a transformer on a CPU, and its geometry differs from MiniLM's in
every way that matters to a code (256 dimensions instead of 384, another model, another
anisotropy, another spectrum). That is why it is the second model here: all-mpnet-base-v2 itself
embeds about 5x slower than MiniLM, some 10 hours for the big corpus on 2 cores.

How it is made (written for this project from the published recipe, not from model2vec's code):
1. every token id of mpnet's vocabulary, framed as ``<s> token </s>``, goes through the transformer,
   and its output is mean-pooled as the model pools sentences;
2. PCA keeps 256 components (centred, not whitened);
3. each token vector is weighted by SIF, a / (a + p), with p the token's Zipf probability from its
   rank in the vocabulary (a = 1e-3), so frequent tokens count less in the mean;
4. a text is the mean of its first 128 tokens' vectors (the truncation mpnet's tokenizer carries).

The result is a sentence-transformers model directory (a StaticEmbedding module) that
``embcompress embed --model`` and the corpus builders load offline.

    python benchmarks/data/fetch_mpnet.py                  # once: bench-data/models/all-mpnet-base-v2
    python benchmarks/data/make_static_model.py [--teacher bench-data/models/all-mpnet-base-v2]
        [--out bench-data/models/mpnet-static-256] [--dims 256]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def token_vectors(model, batch: int = 512) -> np.ndarray:
    """One vector per vocabulary id: the teacher's pooled output for ``<s> id </s>``."""
    import torch

    tok = model.tokenizer
    auto = model[0].auto_model
    ids = np.arange(len(tok), dtype=np.int64)
    out = np.empty((len(ids), auto.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for s in range(0, len(ids), batch):
            part = torch.from_numpy(ids[s : s + batch])
            framed = torch.stack(
                [torch.full_like(part, tok.cls_token_id), part, torch.full_like(part, tok.sep_token_id)], 1
            )
            hidden = auto(input_ids=framed, attention_mask=torch.ones_like(framed)).last_hidden_state
            out[s : s + len(part)] = hidden.mean(1).numpy()
    return out


def distill(vectors: np.ndarray, dims: int, a: float = 1e-3) -> np.ndarray:
    """PCA to ``dims`` components, then SIF weights from the Zipf probability of each id's rank."""
    centred = vectors - vectors.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    reduced = centred @ vt[:dims].T
    rank = np.arange(1, len(vectors) + 1, dtype=np.float64)
    p = (1.0 / rank) / np.sum(1.0 / rank)
    return (reduced * (a / (a + p))[:, None]).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", default="bench-data/models/all-mpnet-base-v2")
    ap.add_argument("--out", default="bench-data/models/mpnet-static-256")
    ap.add_argument("--dims", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=128, help="a text's first N tokens are averaged")
    args = ap.parse_args()
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    from embcompress.embedding.embed import load_model

    out = Path(args.out)
    if (out / "modules.json").is_file():
        print(f"{out} exists, kept")
        return
    t0 = time.perf_counter()
    teacher = load_model(args.teacher, device="cpu")
    weights = distill(token_vectors(teacher), args.dims)
    tokenizer = teacher.tokenizer.backend_tokenizer
    tokenizer.enable_truncation(args.max_tokens)  # what mpnet's saved tokenizer does (its model reads 384)
    static = StaticEmbedding(tokenizer, embedding_weights=weights)
    tmp = out.with_name(out.name + ".tmp")
    SentenceTransformer(modules=[static], device="cpu").save(str(tmp))
    tmp.rename(out)
    print(
        f"{weights.shape[0]} tokens x {weights.shape[1]} dims distilled from {args.teacher} in "
        f"{time.perf_counter() - t0:.0f} s -> {out}"
    )


if __name__ == "__main__":
    main()
