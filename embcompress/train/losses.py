"""Contrastive losses as pure functions over embeddings (Dinu et al., 2025).

Conventions: ``anchor`` and ``positive`` are (B, d) tensors; ``negatives`` optional (B, H, d) hard
negatives, H per anchor. Similarity is cosine (the embeddings are L2-normalized inside), and
``scale = 1 / tau``. Every loss is a mean over the B anchors. For anchor i the candidates are all B
positives of the batch (the in-batch negatives are the other anchors' positives) plus every hard
negative in the batch; the target is its own positive.

* :func:`info_nce` - eq. 1, with optional similarity-based weights on the negatives;
* :func:`temp_agg` - eq. 6: sum_t w_t InfoNCE(tau_t);
* :func:`mrl` - eq. 5/7: sum_i lambda_i loss(f[:d_i]) wrapped around any loss above;
* :func:`temp_agg_mrl` - eq. 7; :func:`temp_spec_mrl` - eq. 8: InfoNCE with tau_i at width d_i;
* :func:`hardest_negative_margin` - eq. 2, the tau -> 0 limit of InfoNCE (scaled by 1 / tau).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F

from ..core._util import check_positive_int
from ..core.errors import InputError


def check_tau(tau: float) -> float:
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not math.isfinite(tau) or tau <= 0:
        raise InputError(f"temperature tau must be a positive number, got {tau!r}")
    return float(tau)


def check_dims(dims: Sequence[int], full: int | None = None) -> list[int]:
    dims = list(dims)
    if not dims:
        raise InputError("Matryoshka widths must not be empty")
    for d in dims:
        check_positive_int("each Matryoshka width", d)
    if len(set(dims)) != len(dims):
        raise InputError(f"Matryoshka widths must not repeat, got {dims}")
    if full is not None and max(dims) > full:
        raise InputError(f"Matryoshka width {max(dims)} is larger than the model's {full} dimensions")
    return sorted(dims)


def _weights(n: int, weights: Sequence[float] | None, what: str) -> list[float]:
    if weights is None:
        return [1.0] * n
    if len(weights) != n:
        raise InputError(f"{len(weights)} {what} weights for {n} {what}s")
    return [float(w) for w in weights]


def similarity_logits(
    anchor: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor | None = None
) -> torch.Tensor:
    """Cosine similarities of each anchor with every candidate: (B, B + B*H); column i is the
    positive of anchor i."""
    a = F.normalize(anchor, dim=-1)  # (B, d)
    cand = F.normalize(positive, dim=-1)  # (B, d)
    if negatives is not None:
        cand = torch.cat([cand, F.normalize(negatives, dim=-1).reshape(-1, anchor.shape[-1])], dim=0)  # (B + B*H, d)
    return a @ cand.T  # (B, B + B*H)


def info_nce(
    anchor: torch.Tensor,
    positive: torch.Tensor,
    negatives: torch.Tensor | None = None,
    *,
    tau: float = 0.05,
    negative_weight_beta: float = 0.0,
) -> torch.Tensor:
    """InfoNCE with cosine similarity and temperature ``tau`` (Dinu et al., 2025, eq. 1).

    ``negative_weight_beta`` > 0 weights each negative by its similarity to the anchor,
    w_ij = N * softmax_j(beta * s_ij) over the negatives (weights average 1; computed without
    gradient), entering the normalizer as exp(s_ij / tau) * w_ij: the hardness-aware reweighting
    of Robinson et al. (2021); beta = 0 is plain InfoNCE."""
    tau = check_tau(tau)
    sims = similarity_logits(anchor, positive, negatives)  # (B, C)
    B = sims.shape[0]
    logits = sims / tau  # (B, C)
    if negative_weight_beta:
        is_pos = torch.zeros_like(sims, dtype=torch.bool)  # (B, C)
        is_pos[torch.arange(B), torch.arange(B)] = True
        with torch.no_grad():
            w = torch.softmax((negative_weight_beta * sims).masked_fill(is_pos, float("-inf")), dim=1)  # (B, C)
            w = w * (sims.shape[1] - 1)  # mean weight 1 over the negatives
            log_w = torch.where(is_pos, torch.zeros_like(w), torch.log(w.clamp_min(1e-30)))  # (B, C)
        logits = logits + log_w
    return F.cross_entropy(logits, torch.arange(B, device=sims.device))


def temp_agg(
    anchor,
    positive,
    negatives=None,
    *,
    taus: Sequence[float] = (0.03, 0.06, 0.1),
    weights: Sequence[float] | None = None,
    negative_weight_beta: float = 0.0,
) -> torch.Tensor:
    """Temperature aggregation (Dinu et al., 2025, eq. 6): sum_t w_t InfoNCE(tau_t); default taus and
    w_t = 1 as in the paper."""
    if not taus:
        raise InputError("TempAgg needs at least one temperature")
    ws = _weights(len(taus), weights, "temperature")
    return sum(
        w * info_nce(anchor, positive, negatives, tau=t, negative_weight_beta=negative_weight_beta)
        for t, w in zip(taus, ws)
    )


def mrl(
    loss: Callable[..., torch.Tensor],
    anchor,
    positive,
    negatives=None,
    *,
    dims: Sequence[int],
    weights: Sequence[float] | None = None,
    **kwargs,
) -> torch.Tensor:
    """Matryoshka wrapper (eq. 5/7): sum_i lambda_i loss(f[:d_i]) over the leading d_i dims."""
    dims = check_dims(dims, anchor.shape[-1])
    ws = _weights(len(dims), weights, "width")
    total = 0.0
    for d, w in zip(dims, ws):
        neg = negatives[..., :d] if negatives is not None else None  # (B, H, d)
        total = total + w * loss(anchor[:, :d], positive[:, :d], neg, **kwargs)  # each on (B, d)
    return total


def temp_agg_mrl(
    anchor,
    positive,
    negatives=None,
    *,
    dims: Sequence[int],
    taus: Sequence[float] = (0.03, 0.06, 0.1),
    dim_weights: Sequence[float] | None = None,
    tau_weights: Sequence[float] | None = None,
    negative_weight_beta: float = 0.0,
) -> torch.Tensor:
    """TempAggMRL (Dinu et al., 2025, eq. 7): TempAgg at every Matryoshka width."""

    def at_width(a, p, n):
        return temp_agg(a, p, n, taus=taus, weights=tau_weights, negative_weight_beta=negative_weight_beta)

    return mrl(at_width, anchor, positive, negatives, dims=dims, weights=dim_weights)


def temp_spec_mrl(
    anchor,
    positive,
    negatives=None,
    *,
    tau_by_dim: Mapping[int, float],
    weights: Sequence[float] | None = None,
    negative_weight_beta: float = 0.0,
) -> torch.Tensor:
    """TempSpecMRL (Dinu et al., 2025, eq. 8): InfoNCE at width d_i with its own tau_i, e.g.
    {256: 0.03, 512: 0.06, 1024: 0.1}."""
    if not tau_by_dim:
        raise InputError("TempSpecMRL needs a {width: tau} mapping")
    dims = check_dims(list(tau_by_dim), anchor.shape[-1])
    ws = _weights(len(dims), weights, "width")
    total = 0.0
    for d, w in zip(dims, ws):
        neg = negatives[..., :d] if negatives is not None else None
        total = total + w * info_nce(
            anchor[:, :d], positive[:, :d], neg, tau=tau_by_dim[d], negative_weight_beta=negative_weight_beta
        )
    return total


def hardest_negative_margin(anchor, positive, negatives=None) -> torch.Tensor:
    """Seed 000 eq. 2: mean over anchors of max(s(a, hardest negative) - s(a, positive), 0)."""
    sims = similarity_logits(anchor, positive, negatives)  # (B, C)
    B = sims.shape[0]
    pos = sims[torch.arange(B), torch.arange(B)]  # (B,)
    hardest = (
        sims.masked_fill(torch.eye(B, sims.shape[1], dtype=torch.bool, device=sims.device), float("-inf"))
        .max(dim=1)
        .values
    )  # (B,)
    return (hardest - pos).clamp_min(0).mean()
