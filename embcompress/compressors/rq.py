"""Additive quantization: a vector is the mean plus one full-width codeword from each of ``m``
codebooks, so every code byte refines the whole vector; decoding, lookup tables and the saved
state are the same for every way of choosing the codewords (:class:`Additive`).

* :class:`RQ`, residual quantization: the codebooks are applied one after another, each coding
  what the previous ones left (faiss ``ResidualQuantizer``), trained and encoded with faiss and
  scored with asymmetric lookup tables.

faiss's ``LocalSearchQuantizer`` (LSQ++) is not offered: it draws its perturbations from one
generator per call, so a vector's code depends on the rows encoded with it (measured: 9 of 20
codes change when a subset is encoded alone), which breaks the same-bytes-for-any-batching rule
of streaming; one call per row is deterministic but recomputes the codebooks' cross products
each time (6 rows/s). Its quality and cost: docs/reference/results.md."""

from __future__ import annotations


import numpy as np

from ..core import persist
from ..core._util import check_positive_int, faiss_blas_distances, require
from ..core.specs import OutputSpec
from ..core.checks import make_rng
from ..core.capabilities import TableScan
from ..core.errors import InputError
from ..core.specs import Traits
from ..core.registry import register
from ._codes import nibble_indices, nibble_tables
from ._faiss import FaissBacked
from ._sample import reservoir, stream_mean

NBITS = (4, 8)
#: the largest beam tables (codeword inner products) encoding builds; larger models encode without
BEAM_TABLES_MAX_BYTES = 512 * 2**20


class Additive(TableScan, FaissBacked):
    """``x ~ mean + C_1[c_1] + ... + C_m[c_m]``: ``m`` codebooks of ``2**nbits`` full-width codewords
    (one byte per codebook, two per byte at ``nbits=4``), trained on the centred sample (up to
    ``max_rows`` rows) by a faiss additive quantizer that a subclass makes (:meth:`_new_quantizer`).
    A float query's inner product with the decoded vector is ``<q, mean> + sum_j <q, C_j[c_j]>``:
    one 256-entry table per byte."""

    _positional = "m"
    _state_arrays = ("codebooks_", "mean_")
    #: what ``_new_quantizer`` builds, for messages
    _what = "additive quantization"

    @property
    def traits(self) -> Traits:  # a uniform sample of max_rows rows
        return super().traits.with_fit(min_rows=2 ** int(self.nbits), sample=self.max_rows)

    def _validate_params(self, n_features: int) -> None:
        check_positive_int("m", self.m)
        if isinstance(self.nbits, bool) or self.nbits not in NBITS:
            raise InputError(f"{self.name} nbits must be 4 or 8 (two or one codebooks per byte), got {self.nbits!r}")
        check_positive_int("max_rows", self.max_rows, minimum=2**self.nbits)
        make_rng(self.seed)

    def _new_quantizer(self, d: int):
        """(the faiss module, a new untrained quantizer with this model's settings)."""
        raise NotImplementedError

    def _fit(self, batches, n_features: int) -> None:
        self.mean_ = stream_mean(batches)
        X = reservoir(batches, self.max_rows, make_rng(self.seed))
        faiss, q = self._new_quantizer(n_features)
        with faiss_blas_distances(faiss):
            q.train(np.ascontiguousarray(X - self.mean_))
        self.codebooks_ = (
            faiss.vector_to_array(q.codebooks).reshape(int(self.m), 2 ** int(self.nbits), n_features).astype(np.float32)
        )
        # encode with a quantizer rebuilt from the codebooks, as after loading, so that the codes of
        # a fitted and a loaded model are the same (the trained one breaks near-ties differently);
        # built here, not on first use, as transform must leave the estimator's __dict__ as it is
        self.__dict__["_faiss_obj"] = None
        self._faiss(n_features)

    def _build_faiss(self, d: int):
        """The faiss quantizer holding the fitted codebooks."""
        faiss, q = self._new_quantizer(d)
        faiss.copy_array_to_vector(np.ascontiguousarray(self.codebooks_).ravel(), q.codebooks)
        q.is_trained = True
        return q

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return self._faiss().compute_codes(np.ascontiguousarray(X - self.mean_, dtype=np.float32))

    def decode(self, codes: np.ndarray) -> np.ndarray:
        self._check_fitted()
        codes = np.asarray(codes, dtype=np.uint8)
        idx = codes if self.nbits == 8 else nibble_indices(codes, int(self.m))
        out = np.broadcast_to(self.mean_, (len(codes), self.n_features_in_)).copy()
        for j in range(int(self.m)):
            out += self.codebooks_[j][idx[:, j]]
        return out

    def codebooks(self) -> tuple[np.ndarray, bool, int]:
        """The codebooks, summed (the mean is :meth:`adc_offset`'s)."""
        self._check_fitted()
        return np.asarray(self.codebooks_, dtype=np.float32), True, int(self.nbits)

    def lookup_tables(self, Q: np.ndarray) -> np.ndarray:
        """(queries, code bytes, 256) float32: each query's inner product with every codeword
        (at ``nbits=4`` a byte's entry adds its two codebooks' entries)."""
        self._check_fitted()
        Q = np.asarray(Q, dtype=np.float32)
        m, k, d = self.codebooks_.shape
        T = (Q @ self.codebooks_.reshape(m * k, d).T).reshape(len(Q), m, k)
        return T if self.nbits == 8 else nibble_tables(T)

    def adc_offset(self, Q: np.ndarray) -> np.ndarray:
        return (np.asarray(Q, dtype=np.float32) @ self.mean_).astype(np.float32)

    def _state_shapes(self):
        d = self.n_features_in_
        return {"codebooks_": (int(self.m), 2 ** int(self.nbits), d), "mean_": (d,)}

    def _output_spec(self) -> OutputSpec:
        nbytes = (int(self.m) * int(self.nbits) + 7) // 8
        return OutputSpec(kind="codes", dtype="uint8", width=nbytes, nbytes=nbytes, metric="adc")


@register
class RQ(Additive):
    """``x ~ mean + C_1[c_1] + ... + C_m[c_m]``: ``m`` codebooks of ``2**nbits`` full-width codewords,
    trained greedily on the centred sample (up to ``max_rows`` rows; each stage is k-means on the
    residuals the previous stages leave; ``beam`` > 1 keeps several partial codes while encoding,
    better and slower). One byte per codebook (two at ``nbits=4``). A float query's inner product with the decoded
    vector is ``<q, mean> + sum_j <q, C_j[c_j]>``: one 256-entry table per byte.

    Slower to train and to encode than ``pq``/``opq`` (every codebook spans all dimensions), and
    it keeps more per byte; its many codewords partly memorize the rows it was fitted on, so its
    figure on documents outside the fit sample is the one to read. ``beam=4`` trains and encodes
    with a beam of 4: slower to fit and to encode (faiss's table-based beam search up to m = 64 at
    8 bits; above, the tables would pass 512 MB and the plain search is kept), and better on
    documents outside the fit sample. docs/reference/results.md has the measured figures."""

    name = "rq"
    #: each codebook's k-means runs at this many growing widths (faiss's progressive-dimension
    #: clustering, whose own default is 10). A setting of the training, not a parameter: codes are
    #: read the same whatever it was (docs/decisions/0005)
    progressive_steps = 10
    #: k-means iterations at each of those widths: faiss's default (10) without a beam, and half of
    #: it with one, where the codebooks train on ``beam`` residuals of every row. Chosen on four sets
    #: and two models (docs/decisions/0005): with the beam of 4, half
    #: the iterations kept 0.28 points more on average and fitted 1.7x as fast; without a beam it kept
    #: 0.46 points less, so that stays. Settings of the training, not parameters, like the one above
    kmeans_iterations = 10
    beam_kmeans_iterations = 5
    #: each codebook's k-means samples at most this many training points per centroid: faiss's
    #: default (256: 65,536 points for 256 codewords) without a beam, and a quarter of it with one,
    #: where the points are the ``beam`` residuals of every fit row. Chosen on four sets and two
    #: models with the beam of 4: 64 kept 0.09 points more on average (-0.45 to +0.43) and fitted
    #: 1.4-1.6x as fast (docs/decisions/0005); without a beam it was not
    #: measured, so that stays. Settings of the training like the ones above
    kmeans_max_points_per_centroid = 256
    beam_kmeans_max_points_per_centroid = 64

    def __init__(self, m: int = 16, nbits: int = 8, beam: int = 1, max_rows: int = 50_000, seed: int = 0):
        self.m = m
        self.nbits = nbits
        self.beam = beam
        self.max_rows = max_rows
        self.seed = seed

    def _validate_params(self, n_features: int) -> None:
        super()._validate_params(n_features)
        check_positive_int("beam", self.beam)

    def _new_quantizer(self, d: int):
        faiss = require("faiss", "faiss", "rq (residual quantization)")
        rq = faiss.ResidualQuantizer(d, int(self.m), int(self.nbits))
        rq.max_beam_size = int(self.beam)
        rq.cp.progressive_dim_steps = int(self.progressive_steps)
        rq.cp.niter = int(self.beam_kmeans_iterations if int(self.beam) > 1 else self.kmeans_iterations)
        rq.cp.min_points_per_centroid = 1  # small samples are allowed (checked); no warnings on stderr
        rq.cp.max_points_per_centroid = int(
            self.beam_kmeans_max_points_per_centroid if int(self.beam) > 1 else self.kmeans_max_points_per_centroid
        )
        rq.cp.seed = int(self.seed)
        return faiss, rq

    def _build_faiss(self, d: int):
        rq = super()._build_faiss(d)
        if self._beam_tables and not persist.PROBING.get():  # a load's probe encodes 2 rows: no tables
            # the beam's distances from precomputed codeword inner products: the same codes up to
            # float near-ties, 2-3x as fast at beam 4; training keeps the plain search, which the
            # tables do not speed up
            rq.use_beam_LUT = 1
            rq.compute_codebook_tables()
        return rq

    @property
    def _beam_tables(self) -> bool:
        """Whether encoding uses faiss's beam tables: with a beam (at beam 1 the plain search is
        faster) and while the tables, the float32 inner products of every codeword with those of
        the codebooks before it (m (m - 1) / 2 * 4^nbits) held with the model, stay within
        BEAM_TABLES_MAX_BYTES: 296 MB at m = 48, 1.2 GB at m = 96 (8 bits), so up to m = 64."""
        k, m = 2 ** int(self.nbits), int(self.m)
        return int(self.beam) > 1 and 4 * k * k * m * (m - 1) // 2 <= BEAM_TABLES_MAX_BYTES
