"""Batches for contrastive training: homogeneous by source, optionally grouped by length, identical
global batches whatever the number of processes.

* Homogeneous: every batch comes from one source (Dinu et al., 2025 section 3.1: one dataset per
  batch, so the in-batch negatives are of the same kind as the positive). Sources are visited in
  proportion to their size (every pair once per epoch).
* Length-grouped (optional): within a source, windows of ``window`` batches of shuffled pairs are
  sorted by text length before being cut into batches, so a batch pads to a similar length. The
  batches themselves are then shuffled. This trades a little randomness of the negatives for less
  padding (a CPU lever: the encoder's cost grows with the padded length).
* Processes: the sampler cuts *global* batches of ``batch_size`` and hands each of the
  ``world_size`` processes one consecutive slice of each. accelerate gives process r the batches
  r, r + N, ...; so a run on N processes trains on exactly the global batches of a one-process run.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
from torch.utils.data import BatchSampler

from ..core.errors import InputError

SMALL_SOURCES = ("error", "mix", "drop")


def source_groups(
    sources: Sequence[str | None], batch_size: int, *, homogeneous: bool = True, small_sources: str = "error"
) -> dict[str | None, np.ndarray]:
    """Pair indices by source (one group when not ``homogeneous``), checked against the batch size.

    Sources with fewer pairs than ``batch_size``: ``"error"`` (default) stops with the list of them;
    ``"mix"`` pools them into one mixed source (used if it reaches the batch size); ``"drop"``
    leaves them out."""
    if small_sources not in SMALL_SOURCES:
        raise InputError(f"small_sources must be one of {', '.join(SMALL_SOURCES)}, got {small_sources!r}")
    groups: dict[str | None, list[int]] = {}
    for i, s in enumerate(sources):
        groups.setdefault(s if homogeneous else None, []).append(i)
    small = {k: v for k, v in groups.items() if len(v) < batch_size}
    if small and (small_sources == "error" or len(small) == len(groups) and small_sources == "drop"):
        names = ", ".join(
            f"{k if k is not None else '(no source)'} ({len(v)})"
            for k, v in sorted(small.items(), key=lambda kv: len(kv[1]))[:5]
        )
        more = f" and {len(small) - 5} more" if len(small) > 5 else ""
        if not homogeneous or len(groups) == 1:
            raise InputError(
                f"batch size {batch_size} is larger than the {len(sources)} training pairs; lower the batch size"
            )
        raise InputError(
            f"batch size {batch_size} is larger than the pairs of {len(small)} source(s): {names}{more}; every "
            "batch comes from one source; lower the batch size, or pass --small-sources mix (pool them) or "
            "drop, or --no-homogeneous"
        )
    kept = {k: np.asarray(v) for k, v in groups.items() if k not in small}
    if small and small_sources == "mix":
        pooled = np.sort(np.concatenate([np.asarray(v) for v in small.values()]))
        if len(pooled) >= batch_size:
            kept["(mixed small sources)"] = pooled
    if not kept:
        raise InputError(f"no source has {batch_size} pairs, even with the small ones pooled; lower the batch size")
    return kept


class SourceBatchSampler(BatchSampler):
    """Per-process batches of ``batch_size // world_size`` indices; see the module docstring.

    Has ``set_epoch`` (the trainer calls it): each epoch reshuffles from ``seed + epoch``."""

    def __init__(
        self,
        sources: Sequence[str | None],
        batch_size: int,
        *,
        lengths: Sequence[int] | None = None,
        homogeneous: bool = True,
        small_sources: str = "error",
        world_size: int = 1,
        seed: int = 0,
        window: int = 16,
    ) -> None:
        if batch_size < 2:
            raise InputError(f"batch size must be at least 2 (in-batch negatives), got {batch_size}")
        if world_size < 1 or batch_size % world_size:
            raise InputError(f"the batch size {batch_size} must be a multiple of the {world_size} processes")
        self.groups = source_groups(sources, batch_size, homogeneous=homogeneous, small_sources=small_sources)
        self.global_batch = batch_size
        self.world_size = world_size
        self.batch_size = batch_size // world_size  # what each process sees (accelerate reads it)
        self.drop_last = True
        self.lengths = None if lengths is None else np.asarray(lengths)
        self.window = window
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def global_batches(self) -> list[np.ndarray]:
        """This epoch's global batches, in order."""
        rng = np.random.default_rng([self.seed, self.epoch])
        out: list[np.ndarray] = []
        B = self.global_batch
        for idx in self.groups.values():
            perm = rng.permutation(idx)
            usable = len(perm) - len(perm) % B
            perm = perm[:usable]  # the few left over are dropped: no pair twice in an epoch
            if self.lengths is not None:
                span = B * self.window
                perm = (
                    np.concatenate(
                        [
                            w[np.argsort(-self.lengths[w], kind="stable")]
                            for w in (perm[i : i + span] for i in range(0, usable, span))
                        ]
                    )
                    if usable
                    else perm
                )
            out.extend(perm[i : i + B] for i in range(0, usable, B))
        return [out[i] for i in rng.permutation(len(out))]

    def __iter__(self) -> Iterator[list[int]]:
        b = self.batch_size
        for batch in self.global_batches():
            for r in range(self.world_size):
                yield [int(i) for i in batch[r * b : (r + 1) * b]]

    def __len__(self) -> int:
        B = self.global_batch
        return sum(len(v) // B for v in self.groups.values()) * self.world_size


class FixedSampler:
    """A trainer ``batch_sampler`` argument that returns one prepared sampler (picklable, as the
    trainer saves its arguments in every checkpoint)."""

    def __init__(self, sampler: SourceBatchSampler) -> None:
        self.sampler = sampler

    def __call__(self, dataset, **_) -> SourceBatchSampler:
        return self.sampler
