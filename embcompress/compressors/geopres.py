"""GeoPres: a learned linear map trained to preserve pairwise distances (Kalyfommatos et al., 2025), and the
autoencoder baseline of the same paper. Training uses torch (CUDA when present); ``transform`` is
plain numpy."""

from __future__ import annotations

import functools

import numpy as np

from ..core.specs import OutputSpec, float_spec
from ..core.registry import register
from ._learned import LearnedMap

LOSSES = ("positional", "angular", "rank")
#: rows and columns sampled per step for the soft-rank loss (its cost grows with their product)
_RANK_ROWS, _RANK_COLS = 128, 256


#: squared distances below this are clamped before the square root (a duplicate row, the diagonal)
_MIN_SQ = 1e-12


def distance_matrix(torch, Y):
    """(m, m) Euclidean distances of a batch, through autograd: the plain formula that training's
    in-place :func:`positional_loss` is checked against. The squared distances are clamped away
    from 0 before the square root, so duplicate rows and the diagonal give a finite (zero) gradient."""
    sq = (Y * Y).sum(dim=1)  # (m,)
    d2 = sq[:, None] + sq[None, :] - 2 * (Y @ Y.T)  # (m, m)
    return torch.sqrt(d2.clamp_min(_MIN_SQ))  # (m, m)


def _distances_(torch, Y):
    """``distance_matrix`` computed in place in one (m, m) buffer (no autograd): the products, the
    squared norms added, the clamp and the root."""
    sq = (Y * Y).sum(dim=1)
    out = torch.mm(Y, Y.T).mul_(-2).add_(sq[:, None]).add_(sq[None, :])
    return out.clamp_min_(_MIN_SQ).sqrt_()


def positional_loss(torch, target, Z):
    """``mean_offdiagonal_sq(target, distance_matrix(Z))`` with the same value and gradient, its
    (m, m) work done in place and its backward written out (:func:`_positional_function`):
    autograd's version makes about 25 passes over (m, m) arrays and two products for the backward;
    this one makes a handful and one product, d/dZ = 4 (diag(G 1) - G) Z for G = dL/d(d^2)."""
    return _positional_function(torch).apply(target, Z)


@functools.cache
def _positional_function(torch):
    """The autograd Function behind :func:`positional_loss` (defined once torch is imported)."""

    class Positional(torch.autograd.Function):
        @staticmethod
        def forward(ctx, target, Z):
            m = Z.shape[0]
            D = _distances_(torch, Z)  # (m, m)
            diff = torch.sub(target, D)  # (m, m)
            diag = torch.diagonal(diff)
            loss = (torch.dot(diff.reshape(-1), diff.reshape(-1)) - torch.dot(diag, diag)) / (m * (m - 1))
            ctx.save_for_backward(Z, D, diff)
            return loss

        @staticmethod
        def backward(ctx, grad):
            Z, D, diff = ctx.saved_tensors
            m = Z.shape[0]
            # dL/dD = -2 diff / (m (m - 1)) off the diagonal; dD/d(d^2) = 1 / (2 D) where unclamped
            G = diff.div_(D).mul_(-grad / (m * (m - 1)))  # (m, m), in place of diff
            G.masked_fill_(D <= _MIN_SQ**0.5, 0.0)  # clamped: duplicate rows (and the diagonal)
            G.diagonal().zero_()  # left out of the mean
            gz = torch.mm(G, Z).mul_(-4).add_(Z * (4 * G.sum(dim=1, keepdim=True)))  # (m, dim)
            return None, gz

    return Positional


def cosine_matrix(torch, Y):
    """(m, m) cosine similarities; zero vectors give 0, not NaN."""
    Yn = torch.nn.functional.normalize(Y, dim=1, eps=1e-12)  # (m, n)
    return Yn @ Yn.T  # (m, m)


def mean_offdiagonal_sq(torch, A, B):
    """Mean of (A - B)^2 over i != j: for symmetric A and B this is the mean over the pairs i < j
    of Kalyfommatos et al., 2025 eq. 1 / eq. 3, without gathering the triangle."""
    m = A.shape[0]
    diff = A - B  # (m, m)
    return ((diff * diff).sum() - (torch.diagonal(diff) ** 2).sum()) / (m * (m - 1))


def soft_rank(torch, s, temperature: float = 0.01):
    """Differentiable ranks along the last axis: rank_i = 1 + sum_j sigmoid((s_i - s_j) / t)."""
    return 1 + torch.sigmoid((s[..., :, None] - s[..., None, :]) / temperature).sum(dim=-1) - 0.5  # (r, c)


def local_spearman_loss(torch, Y, Z, generator=None):
    """1 - mean per-row Spearman correlation between the cosine similarities of a row to the
    others before (exact ranks) and after (soft ranks) the map, on a random subsample."""
    m = Y.shape[0]
    rows = torch.randperm(m, device=Y.device, generator=generator)[: min(_RANK_ROWS, m)]
    cols = torch.randperm(m, device=Y.device, generator=generator)[: min(_RANK_COLS, m)]
    Yn = torch.nn.functional.normalize(Y, dim=1, eps=1e-12)
    Zn = torch.nn.functional.normalize(Z, dim=1, eps=1e-12)
    target = (Yn[rows] @ Yn[cols].T).argsort(dim=1).argsort(dim=1).float()  # (r, c) exact ranks
    pred = soft_rank(torch, Zn[rows] @ Zn[cols].T)  # (r, c)
    t = target - target.mean(dim=1, keepdim=True)
    p = pred - pred.mean(dim=1, keepdim=True)
    rho = (t * p).sum(dim=1) / (t.norm(dim=1) * p.norm(dim=1)).clamp_min(1e-12)  # (r,)
    return 1 - rho.mean()


@register
class GeoPres(LearnedMap):
    """``f(y) = W y`` (W: dim x n) trained so that pairwise geometry survives the reduction.

        ``loss="positional"`` (the paper's main method, eq. 1): mean squared difference of pairwise
        Euclidean distances within a batch; ``"angular"``: mean squared difference of pairwise cosine
        similarities (eq. 3); ``"rank"``: 1 - local Spearman correlation of cosine similarities, with
        soft ranks (a pairwise-sigmoid relaxation, not the Blondel et al. operator the paper used).
        Defaults follow Kalyfommatos et al., 2025, section 4.2: AdamW lr 1e-2, weight decay 0.1, linear schedule with
        10%
        warm-up, 10 epochs, early stopping with patience 3 on a validation split, best weights restored,
        PyTorch's default initialization (close to a Johnson-Lindenstrauss projection). With less data
    than the paper's 10M passages, 10 epochs are few steps: training runs at least ``min_steps``
    steps (more epochs over the same rows), still stopped early on the validation loss. The paper's
        batch of 20,000 is used on CUDA; on a CPU the default is 2,048 (the distance matrices grow with
        the square of the batch). Fits on at most ``max_rows`` rows (a uniform sample when the data has
        more)."""

    name = "geopres"
    # the contract suite's cases: tiny training budgets (the contract, not the quality; see test_geopres.py)
    _choices = {"loss": LOSSES}
    _state_arrays = ("components_",)

    def __init__(
        self,
        dim: int = 128,
        loss: str = "positional",
        lr: float = 1e-2,
        weight_decay: float = 0.1,
        epochs: int = 10,
        batch_size: int | None = None,
        warmup: float = 0.1,
        patience: int = 3,
        val_fraction: float = 0.1,
        max_rows: int = 500_000,
        min_steps: int = 300,
        seed: int = 0,
        device: str | None = None,
    ):
        self.dim = dim
        self.loss = loss
        self.lr = lr
        self.weight_decay = weight_decay
        self.epochs = epochs
        self.batch_size = batch_size
        self.warmup = warmup
        self.patience = patience
        self.val_fraction = val_fraction
        self.max_rows = max_rows
        self.min_steps = min_steps
        self.seed = seed
        self.device = device

    def _validate_params(self, n_features: int) -> None:
        self._validate_common(n_features)

    def _make_model(self, torch, n_features: int):
        return torch.nn.Linear(n_features, self.dim, bias=False)

    def _target(self, torch, Y):
        if self.loss == "positional":
            return _distances_(torch, Y)  # (m, m)
        return cosine_matrix(torch, Y) if self.loss == "angular" else None

    def _loss(self, torch, model, Y, target):
        Z = model(Y)  # (m, dim)
        if self.loss == "positional":
            return positional_loss(torch, target, Z)
        if self.loss == "angular":
            return mean_offdiagonal_sq(torch, target, cosine_matrix(torch, Z))
        return local_spearman_loss(torch, Y, Z)

    def joint_fit_key(self):
        return None if self.loss == "rank" else super().joint_fit_key()  # the rank loss samples as it trains

    def _export(self, model) -> None:
        self.components_ = model.weight.detach().numpy().astype(np.float32).copy()  # (dim, n)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return X @ self.components_.T

    def _inverse(self, Z: np.ndarray) -> np.ndarray:
        return (Z @ np.linalg.pinv(self.components_).T).astype(np.float32)  # least-squares preimage

    def _state_shapes(self):
        return {"components_": (self.dim, self.n_features_in_)}

    def _output_spec(self) -> OutputSpec:
        return float_spec(self.dim)


@register
class Autoencoder(LearnedMap):
    """Baseline of Kalyfommatos et al., 2025: encoder ``relu(W1 y + b1)`` (n -> dim) and decoder ``W2 h + b2``
    trained on mean squared reconstruction error, same optimizer, schedule and early stopping as
    GeoPres; only the encoder is kept. (The paper gives both layers a ReLU; a ReLU on the decoder
    output could not reconstruct the negative coordinates of normalized embeddings, so the decoder
    here is linear.)"""

    name = "autoencoder"
    _state_arrays = ("weight_", "bias_")

    def __init__(
        self,
        dim: int = 128,
        lr: float = 1e-2,
        weight_decay: float = 0.1,
        epochs: int = 10,
        batch_size: int | None = None,
        warmup: float = 0.1,
        patience: int = 3,
        val_fraction: float = 0.1,
        max_rows: int = 500_000,
        min_steps: int = 300,
        seed: int = 0,
        device: str | None = None,
    ):
        self.dim = dim
        self.lr = lr
        self.weight_decay = weight_decay
        self.epochs = epochs
        self.batch_size = batch_size
        self.warmup = warmup
        self.patience = patience
        self.val_fraction = val_fraction
        self.max_rows = max_rows
        self.min_steps = min_steps
        self.seed = seed
        self.device = device

    def _validate_params(self, n_features: int) -> None:
        self._validate_common(n_features)

    def _make_model(self, torch, n_features: int):
        return torch.nn.Sequential(
            torch.nn.Linear(n_features, self.dim), torch.nn.ReLU(), torch.nn.Linear(self.dim, n_features)
        )

    def _loss(self, torch, model, Y, target):
        return ((model(Y) - Y) ** 2).sum(dim=1).mean()  # (m, n) -> scalar

    def _export(self, model) -> None:
        self.weight_ = model[0].weight.detach().numpy().astype(np.float32).copy()  # (dim, n)
        self.bias_ = model[0].bias.detach().numpy().astype(np.float32).copy()  # (dim,)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return np.maximum(X @ self.weight_.T + self.bias_, 0)

    def _state_shapes(self):
        return {"weight_": (self.dim, self.n_features_in_), "bias_": (self.dim,)}

    def _output_spec(self) -> OutputSpec:
        return float_spec(self.dim)
