"""The code families: ITQ, rotations, fitted 1-bit levels, few-bit SQ, PQ/OPQ (against faiss),
RaBitQ (against a plain-numpy version of the paper's estimator), the lookup-table scan and the dense scan."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import InputError, from_spec
from embcompress.compressors import OPQ
from embcompress.compressors.sq import lloyd_levels
from embcompress.search import Index, float_search
from embcompress.search import adc as adc_module
from embcompress.search import topk as topk_mod
from embcompress.search import scorers as scorers_module
from embcompress.search.adc import adc_scores, adc_topk, dense_scores, scan_adc, scan_dense
from embcompress.search.exact import topk_by_blocks

faiss = pytest.importorskip("faiss")


def clustered(n=3000, d=48, seed=0):
    rng = np.random.default_rng(seed)
    spectrum = np.linspace(1, 0.1, d)  # a decaying spectrum and an offset, like real embeddings
    centers = rng.standard_normal((30, d)) * spectrum
    X = centers[rng.integers(0, 30, n)] + rng.standard_normal((n, d)) * 0.6 * spectrum + 0.1
    return (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def data():
    """Documents, and queries that are noisy copies of some of them."""
    D = clustered()[200:]
    rng = np.random.default_rng(5)
    Q = D[rng.choice(len(D), 200, replace=False)] + 0.02 * rng.standard_normal((200, 48)).astype(np.float32)
    return D, Q


def recall(found, exact):
    return np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(found, exact)])


# ---- rotations and ITQ -------------------------------------------------------------------------
def test_rotation_is_orthogonal_and_seeded(data):
    D, _ = data
    r = from_spec("rotate:seed=4").fit(D)
    np.testing.assert_allclose(r.rotation_ @ r.rotation_.T, np.eye(48), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(r.transform(D), axis=1), 1, atol=1e-5)  # lengths kept
    assert np.array_equal(r.rotation_, from_spec("rotate:seed=4").fit(D).rotation_)
    assert not np.array_equal(r.rotation_, from_spec("rotate:seed=5").fit(D).rotation_)


def test_splitmix64_gives_the_published_sequence():
    """The structured rotation draws its signs and permutations from SplitMix64 written out in
    numpy (so that a saved model's rotation is rebuilt by any numpy): the reference generator's
    first outputs for seed 1234567."""
    from embcompress.compressors.rotate import _splitmix64

    assert [int(v) for v in _splitmix64(1234567, 5)] == [6457827717110365317, 3203168211198807973, 9817491932198370423,
                                                       4593380528125082431, 16408922859458223821]


@pytest.mark.parametrize("d", [1, 5, 64, 100, 384])
def test_hadamard_rotation_is_orthogonal_and_its_kernel_equals_numpy(d, monkeypatch):
    """rotate's structured rotation: orthogonal, the dense matrix it saves is the transform, the
    C kernel writes the numpy path's bytes (rows in groups of 8, and a tail), any batch the same
    rows, another seed another rotation."""
    from embcompress.compressors import rotate

    X = np.random.default_rng(d).standard_normal((203, d)).astype(np.float32)
    X[4] = 0
    M = rotate.hadamard_matrix(d, 3)
    np.testing.assert_allclose(M @ M.T, np.eye(d), atol=1e-5)
    fast = rotate.hadamard_rotate(X, 3)
    np.testing.assert_allclose(fast, X @ M, atol=1e-5)
    np.testing.assert_array_equal(rotate.hadamard_rotate(X[5:12], 3), fast[5:12])
    if d > 1:
        assert not np.allclose(rotate.hadamard_matrix(d, 4), M)
    mean = X.mean(0)
    centred = rotate.hadamard_rotate(X, 3, mean)  # centring in the same pass: the centred rows' rotation
    np.testing.assert_array_equal(centred, rotate.hadamard_rotate(X - mean, 3))
    if rotate._pack is not None:
        monkeypatch.setattr(rotate, "_pack", None)
        np.testing.assert_array_equal(rotate.hadamard_rotate(X, 3), fast)
        np.testing.assert_array_equal(rotate.hadamard_rotate(X, 3, mean), centred)


def test_rotate_hadamard_saves_loads_and_keeps_what_the_dense_rotation_keeps(data, tmp_path):
    """``rotate:kind=hadamard`` before sign bits: the same codes after a save and load, and
    about the nearest neighbours a dense random rotation keeps (within sampling noise here)."""
    from embcompress import load, save

    D, Q = data
    exact = float_search(Q, D, 10)[1]
    got = {}
    for kind in ("haar", "hadamard"):
        chain = from_spec(f"rotate:center=true,kind={kind}+binary").fit(D)
        codes = chain.transform(D)
        if kind == "hadamard":
            save(chain, tmp_path / "m")
            np.testing.assert_array_equal(load(tmp_path / "m").transform(D), codes)
        got[kind] = recall(Index(codes, compressor=chain).search(Q, 10).rows, exact)
    assert got["hadamard"] > 0.3 and got["hadamard"] >= got["haar"] - 0.05, got
    with pytest.raises(InputError, match="rotate kind must be one of haar, hadamard, got 'fast'"):
        from_spec("rotate:kind=fast")  # refused as the spec is read, before any data
    with pytest.raises(InputError, match="rabitq rotation must be one of haar, hadamard, got 'dense'"):
        from_spec("rabitq:1:rotation=dense")


def test_itq_lowers_the_quantization_loss(data):
    """Each iteration solves the Procrustes step exactly, so the loss never rises, and it ends
    below the loss of the random rotation it started from and of other random rotations."""
    D, _ = data
    itq = from_spec("itq:iters=50").fit(D)
    loss = itq.loss_
    assert np.all(np.diff(loss) <= 1e-6) and loss[-1] < loss[0] - 0.01
    np.testing.assert_allclose(itq.rotation_ @ itq.rotation_.T, np.eye(48), atol=1e-4)
    V = D - itq.mean_
    for seed in range(5):
        Z = V @ from_spec(f"rotate:seed={seed}").fit(D).rotation_
        assert loss[-1] < ((np.sign(Z) - Z) ** 2).mean()


def test_itq_against_faiss_itq_transform(data):
    """faiss ITQTransform (PCA to the same width, then ITQ) and ours reach a similar loss."""
    D, _ = data
    ours = from_spec("itq:iters=50").fit(D)
    Z = ours.transform(D)
    our_loss = float(((np.sign(Z) - Z * np.abs(Z).mean()) ** 2).mean())
    ft = faiss.ITQTransform(48, 48, False)
    ft.train(D)
    F = ft.apply_py(D)
    their_loss = float(((np.sign(F) - F * np.abs(F).mean()) ** 2).mean())
    assert our_loss <= their_loss * 1.05, (our_loss, their_loss)


# ---- binary levels, SQ ---------------------------------------------------------------------------
def test_lloyd_levels_beat_uniform_levels():
    X = np.random.default_rng(0).standard_normal((20000, 3)).astype(np.float32)
    lv = lloyd_levels(X, 4, 200)
    # the Lloyd-Max 2-bit quantizer of a standard normal: +-0.4528, +-1.510 (up to sampling noise)
    for j in range(3):
        np.testing.assert_allclose(np.sort(lv[j]), [-1.510, -0.4528, 0.4528, 1.510], atol=0.05)


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_sq_codes_pack_and_decode(bits, data):
    D, Q = data
    c = from_spec(f"sq:{bits}").fit(D)
    codes = c.transform(D)
    assert codes.shape == (len(D), 48 * bits // 8) and c.output_spec.kind == "codes"
    dec = c.decode(codes)
    assert dec.shape == D.shape
    # every decoded value is its column's level nearest to the original value
    nearest = np.abs(D[:, :, None] - c.levels_[None]).argmin(axis=2)
    np.testing.assert_array_equal(dec, np.take_along_axis(c.levels_[None].repeat(len(D), 0), nearest[:, :, None], 2)[:, :, 0])
    np.testing.assert_allclose(adc_scores(c.lookup_tables(Q), codes), Q @ dec.T, rtol=1e-4, atol=1e-5)


def test_sq_bits_trade_size_for_recall(data):
    D, Q = data
    exact = float_search(Q, D, 10)[1]
    r = [recall(Index(c.transform(D), compressor=c).search(Q, 10).rows, exact)
         for c in (from_spec(f"sq:{b}").fit(D) for b in (1, 2, 4))]
    assert r[0] < r[1] < r[2] and r[2] > 0.65, r


# ---- PQ / OPQ against faiss ------------------------------------------------------------------------
@pytest.mark.parametrize("spec,m,nbits", [("pq:8", 8, 8), ("pq:12:nbits=4", 12, 4), ("pq:3:nbits=4", 3, 4)])
def test_pq_matches_faiss(spec, m, nbits, data):
    D, Q = data
    c = from_spec(spec).fit(D)
    ref = faiss.ProductQuantizer(48, m, nbits)
    faiss.copy_array_to_vector(c.centroids_.ravel(), ref.centroids)
    codes = c.transform(D)
    np.testing.assert_array_equal(codes, ref.compute_codes(D))
    np.testing.assert_allclose(c.decode(codes), ref.decode(codes), atol=1e-6)
    # our lookup tables and scan = faiss IndexPQ with inner product on the same codes
    index = faiss.IndexPQ(48, m, nbits, faiss.METRIC_INNER_PRODUCT)
    faiss.copy_array_to_vector(c.centroids_.ravel(), index.pq.centroids)
    index.is_trained = True
    index.add(D)
    fs, fi = index.search(Q, 10)
    s, i = adc_topk(c.lookup_tables(Q), codes, 10)
    np.testing.assert_allclose(s, fs, rtol=1e-4, atol=1e-5)
    true_ip = Q @ ref.decode(codes).T  # the same documents up to exact ties (identical codes are common)
    np.testing.assert_allclose(np.take_along_axis(true_ip, i, 1), np.take_along_axis(true_ip, fi, 1), rtol=1e-4, atol=1e-5)
    # the index ranks by <q, x_hat> / ||x_hat|| ** norm_power, x_hat faiss's reconstruction: at
    # power 1 its cosine, as float search ranks by cosine
    rec_norms = np.linalg.norm(ref.decode(codes), axis=1)
    assert Index(codes, compressor=c).norm_power == 1.0  # the cosine unless told
    for power in (1.0, 1.5, 0.0):
        ours = Index(codes, compressor=c, norm_power=power).search(Q, 10)
        top = np.sort(true_ip / rec_norms[None, :] ** power, axis=1)[:, ::-1][:, :10]
        np.testing.assert_allclose(ours.scores, top, rtol=1e-4, atol=1e-5)


def test_opq_rotation_is_orthogonal_and_helps(data):
    D, Q = data
    opq = from_spec("opq:6").fit(D)
    np.testing.assert_allclose(opq.rotation_ @ opq.rotation_.T, np.eye(48), atol=1e-4)
    err = {s: float(((from_spec(s).fit(D).decode(from_spec(s).fit(D).transform(D)) - D) ** 2).sum()) for s in ("pq:6", "opq:6")}
    assert err["opq:6"] < err["pq:6"], err


def test_opq_rotation_on_a_subset_codebooks_on_all(data, monkeypatch):
    """``OPQ.rotation_max_rows`` below the fit rows: the rotation is learned on a seeded subset, the
    final codebooks on every row (rotated), as a faiss PQ trained on them would be."""
    D, _ = data
    full = from_spec("opq:6").fit(D)
    monkeypatch.setattr(OPQ, "rotation_max_rows", len(D) // 3)
    a, b = from_spec("opq:6").fit(D), from_spec("opq:6").fit(D)
    np.testing.assert_array_equal(a.rotation_, b.rotation_)
    np.testing.assert_allclose(a.rotation_ @ a.rotation_.T, np.eye(48), atol=1e-4)
    assert not np.allclose(a.rotation_, full.rotation_, atol=1e-3)
    ref = faiss.ProductQuantizer(48, 6, 8)
    ref.cp.min_points_per_centroid, ref.cp.seed = 1, 0
    ref.train(np.ascontiguousarray(D @ a.rotation_.T))
    np.testing.assert_allclose(a.centroids_.ravel(), faiss.vector_to_array(ref.centroids), rtol=1e-4, atol=1e-5)


# ---- RaBitQ ---------------------------------------------------------------------------------------
def paper_estimate(q, o, c, P):
    """RaBitQ's 1-bit inner-product estimator written plainly from the paper, one vector at a time:
    x_bar = sign(P^T o')/sqrt(d), <q, o> ~ <q, c> + ||o - c|| <x_bar, P^T q> / <x_bar, P^T o'>."""
    r = o - c
    o_unit = r / np.linalg.norm(r)
    rot_o, rot_q = P.T @ o_unit, P.T @ q
    x_bar = np.where(rot_o > 0, 1.0, -1.0) / np.sqrt(len(o))
    return q @ c + np.linalg.norm(r) * (x_bar @ rot_q) / (x_bar @ rot_o)


def test_rabitq_estimator_matches_the_paper(data):
    D, Q = data
    c = from_spec("rabitq").fit(D)
    rows = c.transform(D[:50])
    ours = Q[:5] @ c.decode(rows).T
    ref = np.array([[paper_estimate(q.astype(np.float64), o.astype(np.float64), c.center_.astype(np.float64),
                                    c.rotation_.astype(np.float64)) for o in D[:50]] for q in Q[:5]])
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)
    # the table scan gives the same ranking signal: estimate minus the per-query <q, c>
    codes, scale = c.adc_codes(rows)
    np.testing.assert_allclose(adc_scores(c.lookup_tables(Q[:5]), codes, scale), ours - (Q[:5] @ c.center_)[:, None],
                               rtol=1e-4, atol=1e-5)


def test_rabitq_estimator_is_unbiased():
    """Over random rotations the estimate averages to the true inner product."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 32)).astype(np.float32)
    q = rng.standard_normal(32).astype(np.float32)
    est = np.array([q @ from_spec(f"rabitq:seed={s}").fit(X).decode(from_spec(f"rabitq:seed={s}").fit(X).transform(X[:5])).T
                    for s in range(300)])  # (300, 5)
    true = X[:5] @ q
    sem = est.std(axis=0) / np.sqrt(len(est))
    assert np.all(np.abs(est.mean(axis=0) - true) < 4 * sem + 1e-3), (est.mean(axis=0), true, sem)


def test_rabitq_more_bits_estimate_better_and_factor_counts(data):
    D, Q = data
    exact = float_search(Q, D, 10)[1]
    r = []
    for b in (1, 2, 3, 4):
        c = from_spec(f"rabitq:{b}").fit(D)
        assert c.output_spec.nbytes == b * 6 + 4  # codes plus one float32 factor per vector
        r.append(recall(Index(c.transform(D), compressor=c).search(Q, 10).rows, exact))
    assert r == sorted(r) and r[-1] > 0.8, r


@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_rabitq_grid_is_the_best_direction_and_kernel_equals_numpy(bits):
    """The grid code maximizes <g, u> / ||g|| over every sign-consistent grid vector (brute force
    for 4 dimensions), and the C kernel gives the numpy version's levels and <g, u> exactly,
    zero rows, zero coordinates and all-equal rows (ties at every scale) included."""
    from embcompress.compressors.rabitq import grid_levels, grid_levels_numpy

    rng = np.random.default_rng(bits)
    top = 2 ** bits - 1
    for d in (4, 37, 200):
        U = rng.standard_normal((120, d)).astype(np.float32)
        U[:, 1] = 0
        U[5], U[6] = 0, 0.5
        v, dots = grid_levels(U, bits)
        v_np, dots_np = grid_levels_numpy(U, bits)
        np.testing.assert_array_equal(v, v_np)
        np.testing.assert_array_equal(dots, dots_np)
        g = 2 * v.astype(np.float64) - top
        assert np.all(np.where(U > 0, g > 0, g < 0))  # the sign of u; u = 0 counts as negative
        np.testing.assert_allclose(dots, (g * U).sum(axis=1), rtol=1e-5, atol=1e-5)
        if d == 4:
            import itertools

            mags = np.array(list(itertools.product(range(1, top + 1, 2), repeat=d)), dtype=np.float64)
            best = (mags @ np.abs(U.T.astype(np.float64))) / np.linalg.norm(mags, axis=1)[:, None]  # (codes, rows)
            ours = (g * U).sum(axis=1) / np.linalg.norm(g, axis=1)
            np.testing.assert_allclose(ours, best.max(axis=0), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["cauchy", "sparse", "rounded", "heavy"])
def test_rabitq_grid_kernel_equals_numpy_on_skewed_rows(kind):
    """The C sweep (counting-sorted steps, chunks of whole buckets, its early stop) finds the codes
    and <g, u> of the numpy version on rows far from Gaussian: heavy tails, mostly zeros, many equal
    magnitudes (ties within and across buckets)."""
    from embcompress.compressors.rabitq import grid_levels, grid_levels_numpy

    rng = np.random.default_rng(len(kind))
    n, d = 40, 300
    U = {"cauchy": lambda: rng.standard_cauchy((n, d)),
         "sparse": lambda: rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.1),
         "rounded": lambda: np.round(rng.standard_normal((n, d)) * 3) / 3,
         "heavy": lambda: rng.exponential(1, (n, d)) ** 3 * rng.choice([-1, 1], (n, d))}[kind]().astype(np.float32)
    for bits in (2, 3, 4):
        v, dots = grid_levels(U, bits)
        v_np, dots_np = grid_levels_numpy(U, bits)
        np.testing.assert_array_equal(v, v_np)
        np.testing.assert_array_equal(dots, dots_np)


@pytest.mark.parametrize("bits", [1, 2, 3, 4])
def test_rabitq_fused_encoder_equals_numpy_path(bits):
    """The C encoder (normalize, grid, planes and factor in one pass) writes the bytes of the numpy
    path exactly: a vector at the centroid (zero residual), zero coordinates, every batch size."""
    from embcompress.compressors import rabitq

    if rabitq._pack is None:
        pytest.skip("the C kernels are not built")
    rng = np.random.default_rng(10 + bits)
    X = (rng.standard_normal((700, 45)) * np.linspace(1, 0.1, 45)).astype(np.float32)
    X[:, 3] = 0
    c = from_spec(f"rabitq:{bits}").fit(X)
    X[7] = c.center_  # residual zero: factor 0
    fused = c.transform(X)
    plain = c._encode(X, fused=False)
    np.testing.assert_array_equal(fused, plain)
    np.testing.assert_array_equal(c.transform(X[5:9]), fused[5:9])  # a short batch: the same rows
    assert c.adc_codes(fused[7:8])[1][0] == 0


def test_rabitq_against_faiss_index_rabitq(data):
    """Same bits, same data: our 1-bit estimator ranks about as well as faiss IndexRaBitQ."""
    D, Q = data
    exact = float_search(Q, D, 10)[1]
    c = from_spec("rabitq").fit(D)
    ours = recall(Index(c.transform(D), compressor=c).search(Q, 10).rows, exact)
    index = faiss.IndexRaBitQ(48, faiss.METRIC_INNER_PRODUCT)
    index.train(D)
    index.add(D)
    theirs = recall(index.search(Q, 10)[1], exact)
    assert ours >= theirs - 0.05, (ours, theirs)


@pytest.mark.parametrize("bits", [1, 4])
def test_rabitq_with_the_structured_rotation(data, tmp_path, bits):
    """``rotation=hadamard``: the fused encoder writes the numpy path's bytes, a saved model codes
    the same, and it ranks about as well as the dense rotation."""
    from embcompress import load, save

    D, Q = data
    exact = float_search(Q, D, 10)[1]
    c = from_spec(f"rabitq:{bits}:rotation=hadamard").fit(D)
    codes = c.transform(D)
    np.testing.assert_array_equal(c._encode(D, fused=False), codes)
    save(c, tmp_path / "m")
    np.testing.assert_array_equal(load(tmp_path / "m").transform(D), codes)
    ours = recall(Index(codes, compressor=c).search(Q, 10).rows, exact)
    dense = from_spec(f"rabitq:{bits}").fit(D)
    theirs = recall(Index(dense.transform(D), compressor=dense).search(Q, 10).rows, exact)
    assert ours >= theirs - 0.05, (ours, theirs)


# ---- the lookup-table scan -------------------------------------------------------------------------
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_adc_kernel_equals_reference_with_ties_by_row(threads):
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 4, (5000, 6)).astype(np.uint8)  # few values: many exact ties
    tables = rng.integers(0, 3, (40, 6, 256)).astype(np.float32)
    scale = np.where(rng.random(5000) < 0.5, 1.0, 2.0).astype(np.float32)
    for sc in (None, scale):
        s, i = scan_adc(tables, codes, 25, scale=sc, threads=threads)
        rs, ri = topk_by_blocks(lambda q0, q1, d0, d1: adc_scores(tables[q0:q1], codes[d0:d1], None if sc is None else sc[d0:d1]),
                                40, 5000, 25)
        np.testing.assert_array_equal(i, ri)
        np.testing.assert_array_equal(s, rs)
    s, i = scan_adc(tables[:1], codes, 7000 // 1000, threads=threads)  # one query split by document range
    assert i.shape == (1, 7)


# ---- the dense scan of per-dimension codes ------------------------------------------------------------
@pytest.mark.parametrize("layout,bits", [("planes", 1), ("planes", 3), ("planes", 4), ("packed", 2), ("packed", 4)])
def test_dense_kernel_equals_reference_with_ties_by_row(layout, bits, monkeypatch):
    """Small integer levels, queries and factors make every sum exact, so the kernel (both its
    paths, any thread count, split by query or by document range) must equal numpy exactly,
    ties by row included. 37 dimensions leave a partly used last byte and padded lanes."""
    rng = np.random.default_rng(bits)
    d, nd, nq = 37, 3000, 21
    u = rng.integers(0, 2 ** bits, (nd, d)).astype(np.uint8)
    if layout == "packed":
        from embcompress.compressors._codes import pack_codes

        codes = pack_codes(u, bits)
    else:
        codes = np.concatenate([np.packbits((u >> p) & 1, axis=1) for p in range(bits - 1, -1, -1)], axis=1)
    levels = rng.integers(-3, 4, (d, 2 ** bits)).astype(np.float32)
    Q = rng.integers(-2, 3, (nq, d)).astype(np.float32)
    scale = np.where(rng.random(nd) < 0.5, 1.0, 2.0).astype(np.float32)
    bias, qconst = rng.integers(-1, 2, nd).astype(np.float32), rng.integers(-4, 5, nq).astype(np.float32)
    np.testing.assert_array_equal(adc_module.unpack_dense(codes, layout, bits, d), u)
    monkeypatch.setattr(topk_mod, "MIN_DOCS_PER_THREAD", 500)  # let one query split by document range
    for sc, bi, qc in ((None, None, None), (scale, bias, qconst)):
        rs, ri = topk_by_blocks(lambda q0, q1, d0, d1: dense_scores(
            Q[q0:q1], codes[d0:d1], layout, bits, levels, None if sc is None else sc[d0:d1],
            None if bi is None else bi[d0:d1], None if qc is None else qc[q0:q1]), nq, nd, 25)
        for threads, portable in ((1, False), (2, False), (3, True)):
            for q in (slice(None), slice(0, 1)):
                s, i = scan_dense(Q[q], codes, 25, layout=layout, bits=bits, levels=levels, scale=sc, bias=bi,
                                  qconst=None if qc is None else qc[q], threads=threads, portable=portable)
                np.testing.assert_array_equal(i, ri[q])
                np.testing.assert_array_equal(s, rs[q])
    monkeypatch.setattr(adc_module, "_adc", None)  # where the kernel was not built: numpy, same results
    s, i = scan_dense(Q, codes, 25, layout=layout, bits=bits, levels=levels, scale=scale, bias=bias, qconst=qconst)
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(s, rs)


@pytest.mark.parametrize("bits,d", [(1, 384), (2, 37), (3, 100), (4, 70)])
def test_plane_kernel_equals_reference_with_ties_by_row(bits, d, monkeypatch):
    """Bit-plane codes against 8-bit queries: integer sums are exact, so the SIMD paths (AVX-512 or
    AVX2 fused for up to four queries, unpacked for more; AVX2 forced with path="avx2" where the
    CPU has more), the portable one and numpy give the same scores and rows, ties by row included, for 1..9 queries, any
    thread count, split by query or by document range. Few code values make many ties; the
    dimensions leave partly used bytes and short last chunks."""
    rng = np.random.default_rng(bits * 100 + d)
    nd, pb = 3000, -(-d // 8)
    u = rng.integers(0, 2 ** bits, (nd, d)).astype(np.uint8)
    u[rng.random(nd) < 0.3] = u[0]  # repeated rows: exact ties
    codes = np.concatenate([np.packbits((u >> p) & 1, axis=1) for p in range(bits - 1, -1, -1)], axis=1)
    dpad = -(-pb * 8 // 32) * 32
    Q8 = np.zeros((9, dpad), np.int8)
    Q8[:, :d] = rng.integers(-127, 128, (9, d))
    Q8 = np.ascontiguousarray(Q8.reshape(9, -1, 8)[:, :, ::-1].reshape(9, dpad))  # bit order, as quantized_queries
    step = rng.choice([0.5, 1.0, 2.0], 9).astype(np.float32)
    offset = rng.integers(-50, 50, 9).astype(np.float32)
    scale = np.where(rng.random(nd) < 0.5, 1.0, 2.0).astype(np.float32)
    bias, qconst = rng.integers(-1, 2, nd).astype(np.float32), rng.integers(-4, 5, 9).astype(np.float32)
    monkeypatch.setattr(topk_mod, "MIN_DOCS_PER_THREAD", 500)
    for sc, bi, qc in ((None, None, None), (scale, bias, qconst)):
        rs, ri = topk_by_blocks(lambda q0, q1, d0, d1: adc_module.planes_scores(
            Q8[q0:q1], step[q0:q1], offset[q0:q1], codes[d0:d1], bits, pb, None if sc is None else sc[d0:d1],
            None if bi is None else bi[d0:d1], None if qc is None else qc[q0:q1]), 9, nd, 25)
        # the reference itself: <q8, u> in dimension order
        want = (Q8.reshape(9, -1, 8)[:, :, ::-1].reshape(9, dpad)[:, :d].astype(np.int64) @ u.T.astype(np.int64))
        got = adc_module.planes_scores(Q8, step, offset, codes, bits, pb)
        np.testing.assert_array_equal(got, (want.astype(np.float32) * step[:, None] + offset[:, None]).astype(np.float32))
        for threads, path in ((1, "auto"), (2, "auto"), (1, "avx2"), (2, "avx2"), (3, "portable")):
            for q in (slice(None), slice(0, 1), slice(1, 4), slice(2, 7)):
                s, i = adc_module.scan_planes(Q8[q], step[q], offset[q], codes, 25, bits=bits, plane_bytes=pb, scale=sc,
                                              bias=bi, qconst=None if qc is None else qc[q], threads=threads,
                                              path=path)
                np.testing.assert_array_equal(i, ri[q])
                np.testing.assert_array_equal(s, rs[q])
    with pytest.raises(InputError, match="path must be one of auto, portable, avx2"):
        adc_module.scan_planes(Q8, step, offset, codes, 5, bits=bits, plane_bytes=pb, path="avx512")
    monkeypatch.setattr(adc_module, "_adc", None)
    s, i = adc_module.scan_planes(Q8, step, offset, codes, 25, bits=bits, plane_bytes=pb, scale=scale, bias=bias,
                                  qconst=qconst)
    np.testing.assert_array_equal(i, ri)


def test_rabitq_search_scores_against_8bit_queries_close_to_float(data):
    """RaBitQ's search quantizes the query to 8 bits: its scores stay within a few thousandths (in
    cosine units) of the float table scores, and search ranks by them for one query or many."""
    D, Q = data
    for bits in (1, 4):
        c = from_spec(f"rabitq:{bits}").fit(D)
        codes, scale = c.adc_codes(c.transform(D))
        q8, step, offset = c.quantized_queries(Q)
        B, pb = c.plane_layout()
        est = adc_module.planes_scores(q8, step, offset, codes, B, pb)
        exact = adc_scores(c.lookup_tables(Q), codes)
        # in cosine units (over |P^T q| |g|) the rounding error's deviation is max|q_j| / (127 sqrt(12) |q|)
        Qr = c.dense_queries(Q)
        sigma = (np.abs(Qr).max(axis=1) / (127 * np.sqrt(12) * np.linalg.norm(Qr, axis=1)))[:, None]
        err = np.abs(est - exact) / (np.linalg.norm(Qr, axis=1)[:, None] * np.linalg.norm(c.grid(codes), axis=1)[None, :])
        assert (err / sigma).max() < 8 and (err / sigma).mean() < 1.2, ((err / sigma).max(), (err / sigma).mean())
        index = Index(c.transform(D), compressor=c)  # search takes this path, few queries or many
        for nq in (1, 70):
            rows = index.search(Q[:nq], 10).rows
            want = adc_module.scan_planes(q8[:nq], step[:nq], offset[:nq], codes, 10, bits=B, plane_bytes=pb,
                                          scale=index.scorer._factors(index.scorer.reconstruction()[0]),
                                          bias=index.scorer.reconstruction()[0],
                                          qconst=(Q[:nq] @ index.scorer.reconstruction()[1] + c.adc_offset(Q[:nq])))[1]
            assert (rows == want).mean() > 0.98  # the queries' float products differ in last bits by batch shape


def test_dense_paths_agree_bit_for_bit_on_real_codes(data):
    """On float data the AVX2 path (where the CPU has it) and the portable one give the same scores."""
    D, Q = data
    c = from_spec("rabitq:4").fit(D)
    codes, scale = c.adc_codes(c.transform(D))
    layout, bits, levels = c.dense_codes()
    qd = c.dense_queries(Q)
    fast = scan_dense(qd, np.ascontiguousarray(codes), 30, layout=layout, bits=bits, levels=levels, scale=scale)
    slow = scan_dense(qd, np.ascontiguousarray(codes), 30, layout=layout, bits=bits, levels=levels, scale=scale, portable=True)
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])


@pytest.mark.parametrize("spec", ["rabitq:2", "rabitq:4", "sq:4", "sq:2"])
def test_decoded_scan_matches_tables(spec, data):
    """dense_codes() decodes to what the lookup tables sum, and a batch large enough for the dense
    scan finds what the tables find one query at a time."""
    D, Q = data
    c = from_spec(spec).fit(D)
    rows = c.transform(D)
    codes, scale = c.adc_codes(rows)
    layout, bits, levels = c.dense_codes()
    np.testing.assert_allclose(dense_scores(c.dense_queries(Q[:20]), codes, layout, bits, levels),
                               adc_scores(c.lookup_tables(Q[:20]), codes), rtol=1e-5, atol=1e-4)
    index = Index(rows, compressor=c)
    assert index.scorer.dense is not None and len(Q) >= scorers_module.DENSE_MIN_QUERIES
    batch = index.search(Q, 10)
    alone = [index.search(q[None], 10) for q in Q[:40]]  # below the threshold: tables
    same = np.mean([np.array_equal(a.rows[0], b) for a, b in zip(alone, batch.rows[:40])])
    assert same >= 0.95, same  # the paths differ only in the last bits of float sums (near-ties)
    np.testing.assert_allclose(np.concatenate([a.scores for a in alone]), batch.scores[:40], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", ["pq:12", "opq:12", "pq:12:nbits=4", "rq:6", "rq:5:nbits=4", "sq:1", "sq:4",
                                  "pca:24+sq:2", "rotate+sq:1"])
def test_codes_as_a_matrix_product_match_tables(spec, data):
    """Codes scored as a product of the queries with decoded blocks (scan_decoded) find what the
    lookup tables (or the dense scan) find for the same batch, with the same scores up to
    rounding; small document blocks make the merge across blocks count."""
    D, Q = data
    c = from_spec(spec).fit(D)
    index = Index(c.transform(D), compressor=c)
    scorer = index.scorer
    assert scorer.decoder is not None
    scorer.decoded_from = 10**9
    tables = index.search(Q, 10)
    scorer.decoded_from = 1
    old = adc_module.DECODED_DOC_BLOCK
    try:
        adc_module.DECODED_DOC_BLOCK = 333
        decoded = index.search(Q, 10)
    finally:
        adc_module.DECODED_DOC_BLOCK = old
    same = np.mean(tables.rows == decoded.rows)
    assert same >= 0.99, same  # near-ties may swap in the last bits of the float sums
    np.testing.assert_allclose(decoded.scores, tables.scores, rtol=1e-5, atol=1e-5)


def test_which_codes_the_matrix_product_scores(data):
    """The decoded product takes batches of DECODED_MIN_QUERIES or more for codes of a byte per 8
    dimensions or more, 4,096 or more for codeword sums (RQ), and never bit-plane codes (RaBitQ)
    or codes too short for it to pay."""
    D, Q = data
    d = D.shape[1]

    def starts(spec):
        c = from_spec(spec).fit(D)
        return Index(c.transform(D[:500]), compressor=c).scorer.decoded_from

    assert starts(f"pq:{d // 8}") == scorers_module.DECODED_MIN_QUERIES
    assert starts("sq:1") == scorers_module.DECODED_MIN_QUERIES  # d / 8 bytes
    assert starts(f"rq:{d // 8}") == scorers_module.DECODED_SUM_MIN_QUERIES
    assert starts(f"pq:{d // 16}") is None and starts(f"rq:{d // 16}") is None
    assert starts("rabitq:4") is None


def test_decoders_in_c_equal_numpy(data, monkeypatch):
    """The C decoders (book_decode, dense_decode) give numpy's values exactly, and refuse an index
    past the codebook."""
    if not adc_module.kernel_available():
        pytest.skip("the C kernels were not built")
    D, _ = data
    cases = []
    for spec in ("pq:12", "rq:5:nbits=4", "rq:6"):
        c = from_spec(spec).fit(D)
        cases.append((adc_module.book_vectors, (c.transform(D[:300]), *c.codebooks())))
    for spec in ("sq:1", "sq:2", "rabitq:3"):
        c = from_spec(spec).fit(D)
        codes = c.adc_codes(c.transform(D[:300]))[0]
        cases.append((adc_module.dense_vectors, (codes, *c.dense_codes())))
    fast = [fn(*args) for fn, args in cases]
    monkeypatch.setattr(adc_module, "_adc", None)
    for (fn, args), got in zip(cases, fast):
        np.testing.assert_array_equal(got, fn(*args))
    monkeypatch.undo()
    books = np.zeros((2, 16, 3), np.float32)
    with pytest.raises(ValueError, match="not below ksub"):
        adc_module.book_vectors(np.array([[3, 200]], np.uint8), books, True, 8)


def test_adc_bad_inputs():
    with pytest.raises(InputError, match="do not fit codes"):
        adc_topk(np.zeros((2, 5, 256), np.float32), np.zeros((10, 4), np.uint8), 3)
    with pytest.raises(InputError, match="one value per document"):
        adc_topk(np.zeros((2, 4, 256), np.float32), np.zeros((10, 4), np.uint8), 3, scale=np.ones(9))


# ---- bad input ---------------------------------------------------------------------------------------
def test_code_families_refuse_bad_input(data):
    D, _ = data
    with pytest.raises(InputError, match="pq needs at least 256 rows to fit"):
        from_spec("pq:8").fit(D[:100])
    with pytest.raises(InputError, match=r"pq:7 needs m to divide the width 48 .*allowed m: 1, 2, 3, 4, 6, 8, 12, 16, 24, 48"):
        from_spec("pq:7").fit(D)
    with pytest.raises(InputError, match="nbits must be 4 or 8"):
        from_spec("opq:8:nbits=6").fit(D)
    with pytest.raises(InputError, match="sq bits must be one of 1, 2, 4 per dimension, got 3"):
        from_spec("sq:3").fit(D)
    with pytest.raises(InputError, match="rabitq bits must be one of 1, 2, 3, 4 per dimension, got 9"):
        from_spec("rabitq:bits=9").fit(D)
    with pytest.raises(InputError, match="itq does not take dim"):
        from_spec("itq:dim=5")


@pytest.mark.parametrize("spec,m,nbits", [("rq:4", 4, 8), ("rq:5:nbits=4", 5, 4)])
def test_rq_matches_faiss_and_beats_pq(spec, m, nbits, data):
    D, Q = data
    c = from_spec(spec).fit(D)
    ref = faiss.ResidualQuantizer(48, m, nbits)
    ref.max_beam_size = 1  # our default beam
    faiss.copy_array_to_vector(c.codebooks_.ravel(), ref.codebooks)
    ref.is_trained = True
    codes = c.transform(D)
    np.testing.assert_array_equal(codes, ref.compute_codes(D - c.mean_))
    np.testing.assert_allclose(c.decode(codes), ref.decode(codes) + c.mean_, atol=1e-5)
    np.testing.assert_allclose(adc_scores(c.lookup_tables(Q), codes) + (Q @ c.mean_)[:, None], Q @ c.decode(codes).T,
                               rtol=1e-4, atol=1e-4)
    if nbits == 8:  # every codebook spans all dimensions: less error than pq at the same bytes
        err = {s: float(((from_spec(s).fit(D).decode(from_spec(s).fit(D).transform(D)) - D) ** 2).sum()) for s in ("pq:4", "rq:4")}
        assert err["rq:4"] < err["pq:4"], err


def test_rq_beam_encodes_as_faiss_does(data):
    """With a beam, codes come from faiss's table-based beam search (faster); it finds the codes the
    plain beam search finds, up to float near-ties, which leave the error the same."""
    D, _ = data
    c = from_spec("rq:6:beam=4").fit(D)
    codes = c.transform(D)
    plain = faiss.ResidualQuantizer(48, 6, 8)
    plain.max_beam_size = 4
    faiss.copy_array_to_vector(c.codebooks_.ravel(), plain.codebooks)
    plain.is_trained = True
    ref = plain.compute_codes(D - c.mean_)
    assert (codes == ref).all(axis=1).mean() >= 0.99
    plain.max_beam_size = 1  # the same codebooks without a beam: the beam is what finds the better codes
    err = [float(((c.decode(x) - D) ** 2).sum()) for x in (codes, ref, plain.compute_codes(D - c.mean_))]
    assert err[0] == pytest.approx(err[1], rel=1e-3)
    assert err[0] < 0.95 * err[2]
    # the tables are built where they speed up a beam and are not too large to hold with the model
    assert c._faiss().use_beam_LUT == 1
    from embcompress.compressors.rq import RQ
    assert not RQ(m=6)._beam_tables and RQ(m=64, beam=4)._beam_tables and not RQ(m=65, beam=4)._beam_tables


@pytest.mark.parametrize("user", [None, "active"])
def test_faiss_openmp_waits_passively_unless_the_user_says_otherwise(user):
    """faiss's OpenMP runtime, loaded through embcompress, sleeps between parallel regions (the
    runtime reports its settings at load with OMP_DISPLAY_ENV); a user's OMP_WAIT_POLICY wins; the
    environment is as it was after the import."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env["OMP_DISPLAY_ENV"] = "TRUE"
    if user:
        env["OMP_WAIT_POLICY"] = user
    code = ("import os; from embcompress.core._util import require; require('faiss', 'faiss', 'test'); "
            "print('after:', os.environ.get('OMP_WAIT_POLICY'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    shown = [line.strip() for line in (out.stderr + out.stdout).splitlines() if line.strip().startswith("OMP_WAIT_POLICY")]
    assert shown, out.stderr[-2000:]
    assert shown[0] == ("OMP_WAIT_POLICY = 'ACTIVE'" if user else "OMP_WAIT_POLICY = 'PASSIVE'")
    assert f"after: {user}" in out.stdout


@pytest.mark.parametrize("spec, cls", [("pq:8", "ProductQuantizer"), ("opq:8", "OPQMatrix"), ("rq:4", "ResidualQuantizer")])
def test_faiss_trainings_compute_distances_by_blas_and_restore_the_threshold(spec, cls, monkeypatch):
    """faiss's k-means uses its own distance loop below ``distance_compute_blas_threshold`` (128,000
    rows x dims in faiss 1.15), ten times slower than BLAS on PQ's small sub-spaces; our trainings
    run with FAISS_BLAS_FROM, and the process's own threshold is back after the fit."""
    from embcompress.core._util import FAISS_BLAS_FROM

    seen = []
    train = getattr(faiss, cls).train

    def spy(self, *args, **kwargs):
        seen.append(faiss.cvar.distance_compute_blas_threshold)
        return train(self, *args, **kwargs)

    monkeypatch.setattr(getattr(faiss, cls), "train", spy)
    before = faiss.cvar.distance_compute_blas_threshold
    faiss.cvar.distance_compute_blas_threshold = 777  # a user's own setting
    try:
        X = np.random.default_rng(0).standard_normal((600, 32)).astype(np.float32)
        from_spec(spec).fit(X)
        assert seen and set(seen) == {FAISS_BLAS_FROM}
        assert faiss.cvar.distance_compute_blas_threshold == 777
    finally:
        faiss.cvar.distance_compute_blas_threshold = before


@pytest.mark.parametrize("spec", ["rq:4", "rq:4:beam=4"])
def test_rq_training_settings_reach_faiss(spec, monkeypatch):
    """RQ's settings of the training (class attributes, not parameters) are what faiss trains with."""
    from embcompress.compressors import RQ

    seen = []
    train = faiss.ResidualQuantizer.train

    def spy(self, *args, **kwargs):
        seen.append((self.max_beam_size, self.cp.niter, self.cp.progressive_dim_steps, self.cp.max_points_per_centroid))
        return train(self, *args, **kwargs)

    monkeypatch.setattr(faiss.ResidualQuantizer, "train", spy)
    monkeypatch.setattr(RQ, "kmeans_max_points_per_centroid", 7)
    monkeypatch.setattr(RQ, "beam_kmeans_max_points_per_centroid", 5)
    monkeypatch.setattr(RQ, "progressive_steps", 3)
    from_spec(spec).fit(np.random.default_rng(0).standard_normal((600, 16)).astype(np.float32))
    beam = 4 if "beam" in spec else 1
    assert seen == [(beam, RQ.beam_kmeans_iterations if beam > 1 else RQ.kmeans_iterations, 3, 5 if beam > 1 else 7)]


def test_faiss_blas_threshold_is_restored_when_the_last_of_overlapping_trainings_ends():
    """Trainings on two threads that overlap: the threshold stays set until the last one ends, then
    is what it was before the first (faiss holds it in one global)."""
    import threading
    import types

    from embcompress.core._util import FAISS_BLAS_FROM, faiss_blas_distances

    fake = types.SimpleNamespace(cvar=types.SimpleNamespace(distance_compute_blas_threshold=5))
    first_in, second_out = threading.Event(), threading.Event()
    during = []

    def first():
        with faiss_blas_distances(fake):
            first_in.set()
            second_out.wait(5)
            during.append(fake.cvar.distance_compute_blas_threshold)  # the second ended before this one

    t = threading.Thread(target=first)
    t.start()
    first_in.wait(5)
    with faiss_blas_distances(fake):
        during.append(fake.cvar.distance_compute_blas_threshold)
    second_out.set()
    t.join(5)
    assert during == [FAISS_BLAS_FROM, FAISS_BLAS_FROM]
    assert fake.cvar.distance_compute_blas_threshold == 5
