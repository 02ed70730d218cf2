"""Product quantization (Jegou et al., 2011) and its optimized rotation, OPQ (Ge et al., 2013):
trained and encoded with faiss, scored with asymmetric lookup tables."""

from __future__ import annotations


import numpy as np

from ..core._util import check_positive_int, faiss_blas_distances, require, sample_rows
from ..core.specs import OutputSpec
from ..core.checks import make_rng
from ..core.capabilities import FaissExport, TableScan
from ..core.errors import InputError
from ..core.specs import Traits
from ..core.registry import register
from ._codes import nibble_indices, nibble_tables
from ._faiss import FaissBacked
from ._sample import reservoir

NBITS = (4, 8)


def _divisors(d: int) -> list[int]:
    return [m for m in range(1, d + 1) if d % m == 0]


@register
class PQ(FaissExport, TableScan, FaissBacked):
    """``m`` sub-quantizers of ``2**nbits`` centroids each: the vector is cut into ``m`` equal
    slices and each slice is coded by its nearest centroid (one byte per slice at ``nbits=8``,
    two slices per byte at ``nbits=4``, the first in the low half as faiss packs them).
    The centroids are trained with faiss k-means on a sample of up to ``max_rows`` rows; codes
    are computed by faiss. A float query is scored by the inner product with the decoded vector,
    through one 256-entry table per slice (asymmetric distance computation)."""

    name = "pq"
    _positional = "m"
    _state_arrays = ("centroids_",)

    @property
    def traits(self) -> Traits:  # a uniform sample of max_rows rows
        return super().traits.with_fit(min_rows=2 ** int(self.nbits), sample=self.max_rows)

    def __init__(self, m: int = 16, nbits: int = 8, max_rows: int = 100_000, seed: int = 0):
        self.m = m
        self.nbits = nbits
        self.max_rows = max_rows
        self.seed = seed

    # ---- fitting ------------------------------------------------------------------------------
    def _validate_params(self, n_features: int) -> None:
        check_positive_int("m", self.m)
        if self.m > n_features or n_features % self.m:
            shown = ", ".join(map(str, _divisors(n_features)))
            raise InputError(
                f"{self.name}:{self.m} needs m to divide the width {n_features} into equal slices; allowed m: {shown}"
            )
        if isinstance(self.nbits, bool) or self.nbits not in NBITS:
            raise InputError(
                f"{self.name} nbits must be 4 or 8 (two or one sub-quantizers per byte), got {self.nbits!r}"
            )
        check_positive_int("max_rows", self.max_rows, minimum=2**self.nbits)
        make_rng(self.seed)

    def _sample(self, batches) -> np.ndarray:
        X = reservoir(batches, self.max_rows, make_rng(self.seed))
        return X

    def _new_faiss_pq(self, d: int):
        faiss = require("faiss", "faiss", f"{self.name} (product quantization)")
        pq = faiss.ProductQuantizer(d, int(self.m), int(self.nbits))
        pq.cp.min_points_per_centroid = 1  # small samples are allowed (checked above); no warnings on stderr
        pq.cp.seed = int(self.seed)
        return faiss, pq

    def _fit(self, batches, n_features: int) -> None:
        X = self._sample(batches)
        faiss, pq = self._new_faiss_pq(n_features)
        with faiss_blas_distances(faiss):
            pq.train(np.ascontiguousarray(X))
        self.centroids_ = faiss.vector_to_array(pq.centroids).reshape(int(self.m), pq.ksub, pq.dsub).astype(np.float32)
        self.__dict__["_faiss_obj"] = pq

    def _build_faiss(self, d: int):
        """The faiss ProductQuantizer holding the fitted centroids."""
        faiss, pq = self._new_faiss_pq(self.centroids_.shape[0] * self.centroids_.shape[2])
        faiss.copy_array_to_vector(np.ascontiguousarray(self.centroids_).ravel(), pq.centroids)
        return pq

    # ---- coding -------------------------------------------------------------------------------
    def _rotate(self, X: np.ndarray) -> np.ndarray:
        return X

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return self._faiss().compute_codes(np.ascontiguousarray(self._rotate(X), dtype=np.float32))

    def _indices(self, codes: np.ndarray) -> np.ndarray:
        """(n, m) centroid index per slice from stored rows."""
        codes = np.asarray(codes, dtype=np.uint8)
        return codes if self.nbits == 8 else nibble_indices(codes, self.centroids_.shape[0])

    def _reconstruct(self, codes: np.ndarray) -> np.ndarray:
        idx = self._indices(codes)
        m = self.centroids_.shape[0]
        return (
            np.concatenate([self.centroids_[j][idx[:, j]] for j in range(m)], axis=1)
            if len(idx)
            else np.zeros((0, self.n_features_in_), np.float32)
        )

    def decode(self, codes: np.ndarray) -> np.ndarray:
        self._check_fitted()
        return self._reconstruct(codes)

    def codebooks(self) -> tuple[np.ndarray, bool, int]:
        """The slices' centroids, side by side (in OPQ's rotated space: :meth:`table_queries` rotates)."""
        self._check_fitted()
        return np.asarray(self.centroids_, dtype=np.float32), False, int(self.nbits)

    def table_queries(self, Q: np.ndarray) -> np.ndarray:
        return np.asarray(self._rotate(np.asarray(Q, dtype=np.float32)), dtype=np.float32)

    def lookup_tables(self, Q: np.ndarray) -> np.ndarray:
        """(queries, code bytes, 256) float32: the inner product of each query slice with each
        centroid; at ``nbits=4`` each byte's entry adds its two slices' entries."""
        self._check_fitted()
        Q = np.ascontiguousarray(self._rotate(np.asarray(Q, dtype=np.float32)))
        m, ksub, dsub = self.centroids_.shape
        T = np.einsum("qmd,mkd->qmk", Q.reshape(len(Q), m, dsub), self.centroids_, optimize=True).astype(np.float32)
        return T if self.nbits == 8 else nibble_tables(T)

    def _state_shapes(self):
        d, m = self.n_features_in_, int(self.m)
        shapes = {"centroids_": (m, 2 ** int(self.nbits), d // m)}
        if "rotation_" in self._state_arrays:
            shapes["rotation_"] = (d, d)
        return shapes

    def _output_spec(self) -> OutputSpec:
        nbytes = (int(self.m) * int(self.nbits) + 7) // 8
        return OutputSpec(kind="codes", dtype="uint8", width=nbytes, nbytes=nbytes, metric="adc")

    def to_faiss(self, codes: np.ndarray):
        """faiss ``IndexPQ`` with the fitted codebooks, the codes copied as they are; at ``nbits=4``
        faiss's ``IndexPQFastScan`` made from it (the same codes, scanned with tables in registers, as
        embcompress scans them)."""
        faiss = require("faiss", "faiss", "faiss indexes")
        pq = faiss.IndexPQ(self.n_features_in_, int(self.m), int(self.nbits), faiss.METRIC_INNER_PRODUCT)
        faiss.copy_array_to_vector(self.centroids_.reshape(-1).astype(np.float32), pq.pq.centroids)
        pq.is_trained = True
        faiss.copy_array_to_vector(np.ascontiguousarray(codes, dtype=np.uint8).reshape(-1), pq.codes)
        pq.ntotal = len(codes)
        return faiss.IndexPQFastScan(pq) if int(self.nbits) == 4 else pq


@register
class OPQ(PQ):
    """Product quantization after an orthogonal rotation learned jointly with the codebooks
    (faiss ``OPQMatrix``: alternating codebook training and Procrustes rotation updates), so the
    variance is balanced over the slices. Queries are rotated the same way; decoded vectors are
    rotated back."""

    name = "opq"
    _state_arrays = ("centroids_", "rotation_")

    def to_faiss(self, codes: np.ndarray):
        """PQ's index behind the fitted rotation (``IndexPreTransform``)."""
        faiss = require("faiss", "faiss", "faiss indexes")
        d = self.n_features_in_
        lt = faiss.LinearTransform(d, d, False)
        faiss.copy_array_to_vector(self.rotation_.reshape(-1).astype(np.float32), lt.A)
        lt.is_trained = True
        out = faiss.IndexPreTransform(lt, super().to_faiss(codes))
        out.is_trained = True
        return out

    #: alternations of codebook training and rotation update (faiss's default is 50). A setting of
    #: the training, not a parameter: codes are read the same whatever it was (docs/decisions/0005). 10 fitted 1.5x
    #: as fast but lost on some sets and ratios over
    #: three seeds, down to -1.87 points ("OPQ's rotation at 10 alternations, with three seeds")
    rotation_iterations = 20
    #: the rotation is learned on at most this many of the fit rows (a seeded uniform subset; faiss's
    #: own cap is 65,536), the final codebooks on all of them. A setting of the training like the one
    #: above, chosen on four sets and two models: against 65,536 it kept 0.7 points more on average
    #: (-1.1 to +3.5; OPQ's figures move that much between trainings) and fitted 1.4-2.2x as fast
    #: (docs/decisions/0005)
    rotation_max_rows = 10_000

    def _fit(self, batches, n_features: int) -> None:
        X = np.ascontiguousarray(self._sample(batches))
        faiss, inner = self._new_faiss_pq(n_features)
        opq = faiss.OPQMatrix(n_features, int(self.m))
        opq.niter = int(self.rotation_iterations)
        opq.pq = inner  # our settings (seed, no warnings) for the codebooks OPQ trains while rotating
        keep = sample_rows(len(X), int(self.rotation_max_rows), int(self.seed))
        R = X if len(keep) == len(X) else np.ascontiguousarray(X[keep])
        opq.max_train_points = len(R)  # no second subsample inside faiss
        with faiss_blas_distances(faiss):
            opq.train(R)
            self.rotation_ = faiss.vector_to_array(opq.A).reshape(opq.d_out, opq.d_in).astype(np.float32)  # y = x @ A^T
            faiss, pq = self._new_faiss_pq(n_features)
            pq.train(np.ascontiguousarray(X @ self.rotation_.T))
        self.centroids_ = faiss.vector_to_array(pq.centroids).reshape(int(self.m), pq.ksub, pq.dsub).astype(np.float32)
        self.__dict__["_faiss_obj"] = pq

    def _rotate(self, X: np.ndarray) -> np.ndarray:
        return X @ self.rotation_.T

    def decode(self, codes: np.ndarray) -> np.ndarray:
        self._check_fitted()
        return self._reconstruct(codes) @ self.rotation_
