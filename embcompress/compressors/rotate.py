"""A seeded random orthogonal rotation: spreads the variance evenly over the dimensions before
a 1-bit code, so each bit carries about the same information."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..core._parallel import map_rows
from ..core.base import Compressor
from ..core.specs import OutputSpec, float_spec
from ..core.checks import check_matrix_fits, make_rng
from ..core.capabilities import Affine
from ..core.registry import register
from ._sample import OptionalCentering

try:
    from . import _pack
except ImportError:  # no C compiler at install time: the numpy path writes the same bytes
    _pack = None

#: rotate's kinds: a dense Haar-random matrix (a d x d product per vector), or a structured one
KINDS = ("haar", "hadamard")
#: rounds of the structured rotation, each a permutation, then signs and a Walsh-Hadamard
#: transform on the first and the last 2^k coordinates (2^k <= d < 2^(k+1))
HADAMARD_ROUNDS = 3


def random_orthogonal(d: int, rng: np.random.Generator) -> np.ndarray:
    """A (d, d) orthogonal matrix drawn uniformly (Haar): QR of a Gaussian matrix with the signs
    of R's diagonal folded into Q."""
    check_matrix_fits(d, d, "a rotation")
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


def _splitmix64(seed: int, n: int) -> np.ndarray:
    """``n`` pseudo-random uint64 from ``seed`` (SplitMix64, Steele et al., 2014): written out
    here so that a saved model's structured rotation is rebuilt bit for bit by any numpy, whose
    own generators' streams may change between versions."""
    golden, m1, m2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    with np.errstate(over="ignore"):
        z = np.uint64(int(seed) % 2**64) + golden * np.arange(1, n + 1, dtype=np.uint64)
        z = (z ^ (z >> np.uint64(30))) * m1
        z = (z ^ (z >> np.uint64(27))) * m2
    return z ^ (z >> np.uint64(31))


@lru_cache(maxsize=16)
def hadamard_plan(d: int, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The structured rotation for width ``d``: (permutations (rounds, d) int64, signs (rounds, 2,
    L) float32 of +-1, L), drawn from ``seed`` by :func:`_splitmix64`. Read-only arrays."""
    L = 1 << (int(d).bit_length() - 1)
    keys = _splitmix64(seed, HADAMARD_ROUNDS * (d + 2 * L))
    perm_keys = keys[: HADAMARD_ROUNDS * d].reshape(HADAMARD_ROUNDS, d)
    perms = np.argsort(perm_keys, axis=1, kind="stable").astype(np.int64)
    signs = np.where(keys[HADAMARD_ROUNDS * d :] >> np.uint64(63), -1.0, 1.0).astype(np.float32)
    signs = signs.reshape(HADAMARD_ROUNDS, 2, L)
    perms.flags.writeable = signs.flags.writeable = False
    return perms, signs, L


def _fwht(B: np.ndarray) -> None:
    """Unnormalized fast Walsh-Hadamard transform of each row of ``B`` (C order, width a power
    of two), in place: at each width h the pairs (a, b) become (a + b, a - b), as the C kernel."""
    n, L = B.shape
    h = 1
    while h < L:
        V = B.reshape(n, L // (2 * h), 2, h)
        a = V[:, :, 0, :].copy()
        V[:, :, 0, :] += V[:, :, 1, :]
        np.subtract(a, V[:, :, 1, :], out=V[:, :, 1, :])
        h *= 2


def hadamard_rotate(X: np.ndarray, seed: int, mean: np.ndarray | None = None) -> np.ndarray:
    """Rows of ``X`` (float32, or float64 for the dense matrix), less ``mean`` if given, through
    the structured rotation of :func:`hadamard_plan`: orthogonal, about ``6 d log2(d)`` additions
    per row against ``2 d^2`` for a dense one. float32 goes through the C kernel where it is
    built, the centring in the same pass; both paths round each subtraction, addition and product
    to float32 in the same order, so they give the same bytes."""
    n, d = X.shape
    perms, signs, L = hadamard_plan(d, int(seed))
    scale = X.dtype.type(1.0 / np.sqrt(L))
    if X.dtype == np.float32 and _pack is not None and n:
        X = np.ascontiguousarray(X)
        out = np.empty_like(X)
        m = np.zeros(d, np.float32) if mean is None else np.ascontiguousarray(mean, dtype=np.float32)
        _pack.hadamard(X, m, d, perms, signs, HADAMARD_ROUNDS, L, float(scale), out)
        return out
    Y = np.array(X, copy=True) if mean is None else X - np.asarray(mean, dtype=X.dtype)
    for r in range(HADAMARD_ROUNDS):
        Y = Y[:, perms[r]]
        for k, lo in enumerate((0, d - L) if d > L else (0,)):
            B = np.ascontiguousarray(Y[:, lo : lo + L]) * signs[r, k].astype(Y.dtype)
            _fwht(B)
            Y[:, lo : lo + L] = B * scale
    return Y


def hadamard_matrix(d: int, seed: int) -> np.ndarray:
    """The (d, d) float32 matrix of the structured rotation (``hadamard_rotate(x) = x @ M``),
    computed in float64: what queries, decoding and the inverse multiply by."""
    check_matrix_fits(d, d, "a rotation")  # as the dense rotation: a d x d float64 identity is transformed
    return hadamard_rotate(np.eye(d), seed).astype(np.float32)


def rotation_matrix(kind: str, d: int, seed: int) -> np.ndarray:
    """The (d, d) float32 rotation of ``kind`` (one of :data:`KINDS`) drawn from ``seed``."""
    return hadamard_matrix(d, int(seed)) if kind == "hadamard" else random_orthogonal(d, make_rng(seed))


class OrthogonalMap(Affine, Compressor):
    """``x -> (x - mean_) @ rotation_`` with an orthogonal ``rotation_``: the width is unchanged,
    the inverse is the transpose. Subclasses choose the rotation (and whether to centre)."""

    _state_arrays = ("rotation_", "mean_")

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean_) @ self.rotation_

    def _inverse(self, Z: np.ndarray) -> np.ndarray:
        return Z @ self.rotation_.T + self.mean_

    def linear_part(self, X: np.ndarray) -> np.ndarray:
        return X @ self.rotation_

    def _state_shapes(self):
        d = self.n_features_in_
        return {"rotation_": (d, d), "mean_": (d,)}

    def _output_spec(self) -> OutputSpec:
        return float_spec(self.n_features_in_)


@register
class Rotate(OptionalCentering, OrthogonalMap):
    """``x -> (x - mean) @ R`` with ``R`` a seeded random orthogonal matrix (the mean is
    subtracted only with ``center=True``). Lengths and angles are kept (without centering),
    the width is unchanged; chain it before ``binary``: ``rotate+binary``.

    ``kind="haar"`` (the default) draws ``R`` uniformly: a d x d product per vector.
    ``kind="hadamard"`` is a structured rotation (:func:`hadamard_rotate`: permutations, signs
    and fast Walsh-Hadamard transforms), applied as such to documents, about d log d additions
    per vector; its dense matrix is saved for queries and decoding. benchmarks/codes/bench_rotation.py
    measures how fast it is."""

    name = "rotate"
    _positional = "seed"
    _choices = {"kind": KINDS}

    def __init__(self, seed: int = 0, center: bool = False, kind: str = "haar"):
        self.seed = seed
        self.center = center
        self.kind = kind

    def _fit_stats(self, stats: dict, n_features: int) -> None:
        self.rotation_ = rotation_matrix(self.kind, n_features, self.seed)
        self.mean_ = self._centre_from(stats, n_features)

    def _validate_params(self, n_features: int) -> None:
        make_rng(self.seed)
        self._check_center()

    def _transform(self, X: np.ndarray) -> np.ndarray:
        if self.kind == "hadamard":  # the structured transform itself, not its dense matrix, on every core
            X = np.asarray(X, dtype=np.float32)
            return map_rows(lambda part: hadamard_rotate(part, int(self.seed), self.mean_), X, np.empty_like(X))
        return super()._transform(X)
