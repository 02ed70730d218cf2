"""Properties of an embedding space, and how much of them a compression preserves.

Pure functions over arrays. Zero vectors and duplicate rows never produce NaN or inf: cosine
similarity with a zero vector is 0, and a row whose similarities are all equal (no ranking to
preserve) counts as preserved when both spaces agree on that, else as 0.

* intrinsic dimensionality (Dinu et al., 2025, section 3.2): fewest PCA components explaining a share of
  the variance (95% by default), with the whole explained-variance curve;
* uniformity (Dinu et al., 2025, section 3.2: Wang & Isola's uniformity term with the *normalized* scalar
  product, as the InfoNCE objective uses cosine): mean over points of
  log mean_{j != i} exp(cos(x_i, x_j) / tau); higher means less uniform (more concentrated);
* alignment (Wang & Isola 2020): mean ||x_i - y_i||^2 over positive pairs of unit vectors;
* preservation between an original and a compressed space (Kalyfommatos et al., 2025, sections 3.3, 6 and A.1):
  positional (MSE of pairwise Euclidean distances), angular (MSE of pairwise cosine similarities)
  and the local Spearman rank correlation of cosine similarities, computed per row and averaged;
* kNN classification accuracy ("Cropping outperforms dropout", 2025, section 3.3: k = 10, Euclidean, 9:1 split).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core._util import normalize_rows, sample_rows
from ..compressors.pca import PCA, components_for_variance
from ..core.errors import InputError
from ..search.exact import scan_blocks


def _as_float(X, what: str = "X") -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or len(X) == 0:
        raise InputError(f"{what} must be a non-empty 2-D array, got shape {X.shape}")
    if not np.isfinite(X).all():
        raise InputError(f"{what} holds NaN or inf")
    return X


def _unit(X: np.ndarray) -> np.ndarray:
    return normalize_rows(X, dtype=np.float64)


@dataclass
class IntrinsicDimension:
    components: int  # fewest components reaching the threshold
    threshold: float
    explained_variance_ratio: np.ndarray  # per component, descending
    width: int

    def to_dict(self, curve_points: int | None = None) -> dict:
        curve = np.cumsum(self.explained_variance_ratio)
        if curve_points is not None:
            curve = curve[:curve_points]
        return {
            "components": self.components,
            "threshold": self.threshold,
            "width": self.width,
            "ratio_of_width": self.components / self.width,
            "cumulative_explained_variance": curve.round(6).tolist(),
        }


def intrinsic_dimensionality(
    X, threshold: float = 0.95, *, eigenvalues: np.ndarray | None = None
) -> IntrinsicDimension:
    """PCA components needed to explain ``threshold`` of the variance (Dinu et al., 2025 uses 95%).
    Pass ``eigenvalues`` (e.g. a fitted :class:`~embcompress.PCA`'s ``eigenvalues_``, computed by
    streaming) to skip the fit."""
    if not 0 < threshold <= 1:
        raise InputError(f"threshold must be in (0, 1], got {threshold}")
    if eigenvalues is None:
        X = _as_float(X)
        if len(X) < 2:
            raise InputError("intrinsic dimensionality needs at least 2 rows")
        eigenvalues = PCA(dim=X.shape[1]).fit(X.astype(np.float32)).eigenvalues_
    ev = np.clip(np.asarray(eigenvalues, dtype=np.float64), 0, None)
    total = ev.sum()
    ratio = ev / total if total > 0 else np.zeros_like(ev)
    return IntrinsicDimension(components_for_variance(ev, threshold), threshold, ratio, len(ev))


def uniformity(X, *, tau: float = 1.0, sample: int | None = 5000, seed: int = 0) -> float:
    """mean_i log mean_{j != i} exp(cos(x_i, x_j) / tau), on up to ``sample`` rows."""
    if tau <= 0:
        raise InputError(f"tau must be positive, got {tau}")
    X = _unit(_as_float(X)[sample_rows(len(X), sample, seed)])
    if len(X) < 2:
        raise InputError("uniformity needs at least 2 rows")
    S = X @ X.T / tau  # (n, n)
    np.fill_diagonal(S, -np.inf)
    m = S.max(axis=1, keepdims=True)  # log-mean-exp without overflow
    lme = m[:, 0] + np.log(np.exp(S - m).sum(axis=1) / (len(X) - 1))
    return float(lme.mean())


def alignment(X, Y, *, alpha: float = 2.0) -> float:
    """mean ||x_i - y_i||^alpha over positive pairs (rows of X and Y), on unit vectors."""
    X, Y = _as_float(X, "X"), _as_float(Y, "Y")
    if X.shape != Y.shape:
        raise InputError(f"alignment needs paired rows: X has shape {X.shape}, Y has {Y.shape}")
    return float((np.linalg.norm(_unit(X) - _unit(Y), axis=1) ** alpha).mean())


def _pairwise_dist(X: np.ndarray) -> np.ndarray:
    sq = (X * X).sum(axis=1)
    return np.sqrt(np.clip(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0, None))


@dataclass
class Preservation:
    positional: float  # MSE of pairwise Euclidean distances (lower is better)
    angular: float  # MSE of pairwise cosine similarities (lower is better)
    spearman: float  # mean per-row Spearman rho of cosine similarities (higher is better)
    rows: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def rank_rows(S: np.ndarray) -> np.ndarray:
    """Ranks (1..m) along each row of ``S``, tied values sharing their average rank (as
    ``scipy.stats.rankdata(S, axis=1)``), in float64."""
    S = np.asarray(S)
    n, m = S.shape
    order = np.argsort(S, axis=1, kind="stable")
    sorted_vals = np.take_along_axis(S, order, axis=1)
    # runs of equal values: each position gets the mean of the first and last rank of its run
    starts = np.ones((n, m), dtype=bool)
    starts[:, 1:] = sorted_vals[:, 1:] != sorted_vals[:, :-1]
    ends = np.ones((n, m), dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    idx = np.arange(m)
    first = np.maximum.accumulate(np.where(starts, idx, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, idx, m)[:, ::-1], axis=1)[:, ::-1]
    avg = (first + last) / 2 + 1
    ranks = np.empty((n, m), dtype=np.float64)
    np.put_along_axis(ranks, order, avg, axis=1)
    return ranks


def spearman(a, b) -> float:
    """Spearman rank correlation of two equal-length sequences (average ranks for ties); NaN when
    either is constant."""
    r = rank_rows(np.vstack([np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)]))
    r -= r.mean(axis=1, keepdims=True)
    na, nb = np.linalg.norm(r[0]), np.linalg.norm(r[1])
    return float(r[0] @ r[1] / (na * nb)) if na > 0 and nb > 0 else float("nan")


def local_spearman(S_orig: np.ndarray, S_comp: np.ndarray) -> np.ndarray:
    """Per-row Spearman correlation between two (n, m) similarity matrices (ties: average ranks).
    A row constant in both gives 1, constant in one only gives 0."""
    ra = rank_rows(S_orig)
    rb = rank_rows(S_comp)
    ra -= ra.mean(axis=1, keepdims=True)
    rb -= rb.mean(axis=1, keepdims=True)
    na, nb = np.linalg.norm(ra, axis=1), np.linalg.norm(rb, axis=1)
    rho = np.divide((ra * rb).sum(axis=1), na * nb, out=np.zeros(len(ra)), where=(na > 0) & (nb > 0))
    rho[(na == 0) & (nb == 0)] = 1.0
    return rho


def preservation(X, Z, *, sample: int | None = 2000, seed: int = 0) -> Preservation:
    """How well ``Z`` (compressed rows, as floats: decode codes first) keeps the geometry of ``X``.
    Uses up to ``sample`` rows: every pair among them (i != j)."""
    X, Z = _as_float(X, "original"), _as_float(Z, "compressed")
    if len(X) != len(Z):
        raise InputError(f"original has {len(X)} rows but compressed has {len(Z)}")
    idx = sample_rows(len(X), sample, seed)
    X, Z = X[idx], Z[idx]
    n = len(X)
    if n < 3:
        raise InputError("preservation needs at least 3 rows")
    off = ~np.eye(n, dtype=bool)
    pos = float(((_pairwise_dist(X) - _pairwise_dist(Z))[off] ** 2).mean())
    Sx, Sz = _unit(X) @ _unit(X).T, _unit(Z) @ _unit(Z).T
    ang = float(((Sx - Sz)[off] ** 2).mean())
    # per row, the similarities to every other row (the diagonal is left out)
    rho = local_spearman(Sx[off].reshape(n, n - 1), Sz[off].reshape(n, n - 1))
    return Preservation(pos, ang, float(rho.mean()), n)


def knn_accuracy(X, labels, *, k: int = 10, test_fraction: float = 0.1, seed: int = 0) -> float:
    """kNN classification accuracy with a seeded split ("Cropping outperforms dropout as an
    augmentation strategy for training self-supervised text embeddings", 2025: k = 10, Euclidean,
    9:1). Each test row takes the most common label among its ``k`` nearest training rows by
    Euclidean distance (nearer rows first on equal distance by lower index; a tie in counts goes
    to the smallest label, as scikit-learn's KNeighborsClassifier)."""
    X = _as_float(X)
    labels = np.asarray(labels)
    if len(labels) != len(X):
        raise InputError(f"{len(labels)} labels for {len(X)} rows")
    if len(X) < 2 * k:
        raise InputError(f"kNN accuracy with k={k} needs at least {2 * k} rows, got {len(X)}")
    perm = np.random.default_rng(seed).permutation(len(X))
    n_test = max(1, int(round(test_fraction * len(X))))
    test, train = perm[:n_test], perm[n_test:]
    classes, y = np.unique(labels, return_inverse=True)
    Xtr, Xte = X[train], X[test]
    sq = (Xtr * Xtr).sum(axis=1)
    kk = min(k, len(train))
    # -||a - b||^2 up to a per-query constant: 2 a.b - ||b||^2, larger is nearer
    _, nn = scan_blocks(
        lambda q0, q1, d0, d1: (2 * Xte[q0:q1] @ Xtr[d0:d1].T - sq[d0:d1]).astype(np.float32), len(test), len(train), kk
    )
    votes = np.zeros((len(test), len(classes)), dtype=np.int64)
    np.add.at(votes, (np.repeat(np.arange(len(test)), kk), y[train][nn].reshape(-1)), 1)
    return float((votes.argmax(axis=1) == y[test]).mean())
