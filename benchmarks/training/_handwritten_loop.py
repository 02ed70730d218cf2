"""The hand-written training loop that `embcompress train` used before it moved onto
SentenceTransformerTrainer (embcompress 7154c61, trimmed to what the throughput depends on): kept
only as the "before" reference of bench_train_speed.py, measured in the same run."""

from __future__ import annotations

import time

import numpy as np
import torch

from embcompress.train import info_nce


def handwritten_pairs_per_second(
    model, pairs, *, steps: int, skip: int, batch_size: int = 32, tau: float = 0.05, lr: float = 2e-5, seed: int = 0
) -> float:
    """Homogeneous random batches by source, every layer trained, AdamW + clipping; pairs/s over the
    steps after the first ``skip``."""
    rng = np.random.default_rng(seed)
    groups: dict = {}
    for i, p in enumerate(pairs):
        groups.setdefault(p.source, []).append(i)
    keys = [k for k in groups if len(groups[k]) >= batch_size]
    sizes = np.array([len(groups[k]) for k in keys], dtype=float)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.1)
    prepare = getattr(model, "preprocess", None) or model.tokenize
    model.train()

    def embed(texts):
        return model(prepare(texts))["sentence_embedding"]

    t0 = None
    for step in range(steps):
        if step == skip:
            t0 = time.perf_counter()
        k = keys[rng.choice(len(keys), p=sizes / sizes.sum())]
        batch = [pairs[i] for i in rng.choice(groups[k], size=batch_size, replace=False)]
        loss = info_nce(embed([p.anchor for p in batch]), embed([p.positive for p in batch]), tau=tau)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    return (steps - skip) * batch_size / (time.perf_counter() - t0)
