"""Variants of ``rq:M`` tried against its memorization, on the codes benchmark's first fold: one
model fitted on half of the documents (16,626 of Debian's) encodes every document, and the
retention of nDCG@10 on all queries is the *half-new* figure of ``bench_codes_debian.py``. Also
the mean squared reconstruction error on the half the fit did not see and on the half it did.

    python benchmarks/codes/bench_rq_variants.py [--emb DIR --qrels FILE] [--m 24] VARIANT [VARIANT ...]

Variants:

* ``plain``: ``rq:M`` as embcompress fits it (faiss ``ResidualQuantizer``, progressive-dimension
  k-means per stage).
* ``beam:B``: plain's codebooks (trained greedily), codes chosen with a beam of B.
* ``icm:N``: plain's codebooks; each code then improved by N sweeps of iterated conditional modes
  (each codebook's codeword re-chosen given all the others: LSQ++'s encoding step, without its
  random perturbations, so deterministic per row).
* ``weighted:A``: codebooks trained and codes chosen in the space scaled by the documents' second
  moment to the power A/2, mapped back: minimises the expected squared score error for queries
  distributed like the documents when A = 1 (plain is A = 0).
* ``refine``: faiss's ``Train_refine_codebook`` (least-squares update of all codebooks for the
  training codes after the greedy training).
* ``distill:E``: plain's codes of the fit sample kept, the codebooks made torch parameters and
  trained E epochs to minimise the KL divergence between the softmax of float and of compressed
  scores (temperature 0.05), the fit sample's documents as pseudo-queries over their 64 nearest
  float neighbours and 64 random documents (label-free, in the spirit of Distill-VQ and JPQ). New
  documents are encoded with the new codebooks.
"""

from __future__ import annotations

import sys
from pathlib import Path

import argparse
import time

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from codes.bench_codes_debian import _top_inner, load_set
from embcompress.analysis import evaluate_run
from embcompress.compressors.rq import RQ
from embcompress.evaluation.crossfit import CrossFit
from _util import DEBIAN  # noqa: E402  (the benchmarks' folder is on the path when they run)


def icm_sweeps(R: np.ndarray, codes: np.ndarray, C: np.ndarray, sweeps: int):
    """Improve additive codes in place of a copy: for each codebook in turn, the codeword nearest
    to what the other codebooks leave. ``R`` is the residual of ``codes``. Returns (codes, R)."""
    R, codes = R.copy(), codes.copy()
    norms = (C**2).sum(-1)
    for _ in range(sweeps):
        for j in range(C.shape[0]):
            Rj = R + C[j][codes[:, j]]
            codes[:, j] = np.argmin(norms[j][None, :] - 2 * Rj @ C[j].T, axis=1)
            R = Rj - C[j][codes[:, j]]
    return codes, R


def decode(mean, C, codes):
    return mean + sum(C[j][codes[:, j]] for j in range(C.shape[0]))


def faiss_rq(Y: np.ndarray, m: int, refine: bool) -> np.ndarray:
    """faiss RQ codebooks (m, 256, d) trained on ``Y`` (centred), as embcompress's ``rq`` sets it up."""
    import faiss

    rq = faiss.ResidualQuantizer(Y.shape[1], m, 8)
    rq.max_beam_size = 1  # as rq:M trains (faiss's default is a beam of 5)
    rq.cp.min_points_per_centroid = 1
    rq.cp.seed = 0
    if refine:
        rq.train_type = rq.train_type | faiss.ResidualQuantizer.Train_refine_codebook
    rq.train(np.ascontiguousarray(Y, dtype=np.float32))
    return faiss.vector_to_array(rq.codebooks).reshape(m, 256, Y.shape[1]).astype(np.float32)


def encoder(C: np.ndarray, beam: int = 1):
    """Residual encoding of centred rows with the codebooks ``C`` (faiss, as ``rq`` encodes: greedy
    at ``beam=1``)."""
    import faiss

    rq = faiss.ResidualQuantizer(C.shape[2], C.shape[0], 8)
    rq.max_beam_size = beam
    faiss.copy_array_to_vector(np.ascontiguousarray(C).ravel(), rq.codebooks)
    rq.is_trained = True
    return lambda Z: rq.compute_codes(np.ascontiguousarray(Z, dtype=np.float32)).astype(np.int64)


def distill(P, codes, C, mean, epochs, tau=0.05, lr=1e-3, k=64, neg=64, batch=256, seed=0):
    """Codebooks trained to make compressed scores rank like float scores on the fit sample."""
    import torch

    rng = np.random.default_rng(seed)
    _, nb = _top_inner(P, P, k + 1)
    nb = nb[:, 1:]  # each pseudo-query's nearest documents, itself left out
    m = C.shape[0]
    Cp = torch.nn.Parameter(torch.tensor(C))
    mu, Pt, ct = torch.tensor(mean), torch.tensor(P), torch.tensor(codes)
    opt = torch.optim.Adam([Cp], lr=lr)
    for _ in range(epochs):
        perm = rng.permutation(len(P))
        for b in range(0, len(P), batch):
            qi = perm[b : b + batch]
            cand = np.concatenate([nb[qi], rng.integers(0, len(P), (len(qi), neg))], 1)
            flat = ct[cand.reshape(-1)]
            xh = (mu + sum(Cp[j][flat[:, j]] for j in range(m))).reshape(len(qi), cand.shape[1], -1)
            xh = xh / xh.norm(dim=-1, keepdim=True)
            q = Pt[qi]
            teacher = torch.log_softmax(torch.einsum("bd,bkd->bk", q, Pt[cand]) / tau, 1)
            student = torch.log_softmax(torch.einsum("bd,bkd->bk", q, xh) / tau, 1)
            loss = torch.nn.functional.kl_div(student, teacher, log_target=True, reduction="batchmean")
            opt.zero_grad()
            loss.backward()
            opt.step()
    return Cp.detach().numpy().astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--emb", default="bench-data/debian-ir")
    ap.add_argument("--qrels", default=str(DEBIAN / "qrels.tsv.gz"))
    ap.add_argument("--m", type=int, default=24, help="codebooks of 256 codewords, one byte each (default 24)")
    args = ap.parse_args()
    D, dids, task, _ = load_set(args.emb, args.qrels)
    Q, qids, qrels = task.queries, task.query_ids, task.qrels
    fits = CrossFit(D, 2)
    pool, unseen = fits.pools[0], fits.parts[0]

    def ndcg(X: np.ndarray) -> float:  # documents ranked by the cosine with their reconstruction
        _, top = _top_inner(Q, X / np.linalg.norm(X, axis=1, keepdims=True), 10)
        return evaluate_run({q: [dids[j] for j in r] for q, r in zip(qids, top)}, qrels, 10).ndcg

    ref = ndcg(D)
    mean = D[pool].mean(0)
    print(
        f"{args.emb}: {len(D):,} documents, {len(Q):,} queries, float nDCG@10 {ref:.4f}; rq:{args.m} fitted on "
        f"{len(pool):,} documents, encoding all (half-new)",
        flush=True,
    )
    print(f"  {'variant':14s} {'half-new':>8s} {'mse unseen':>10s} {'mse seen':>9s} {'fit s':>6s} {'enc rows/s':>10s}")
    plain = None
    for v in args.variants:
        kind, _, arg = v.partition(":")
        if kind not in ("plain", "beam", "icm", "weighted", "refine", "distill"):
            raise SystemExit(f"unknown variant {v!r}: plain, beam:B, icm:N, weighted:A, refine, distill:E")
        t0 = time.perf_counter()
        if kind in ("plain", "beam", "icm", "distill"):  # plain's codebooks, fitted once
            if plain is None:
                plain = RQ(args.m).fit(D[pool]).codebooks_
            C = plain
        elif kind == "weighted":
            lam, V = np.linalg.eigh((D[pool].T @ D[pool]).astype(np.float64) / len(pool))
            lam = np.maximum(lam, lam.max() * 1e-6) ** (float(arg) / 2)
            S = ((V * lam) @ V.T / np.sqrt(np.mean(lam**2))).astype(np.float32)
            C = (faiss_rq((D[pool] - mean) @ S, args.m, False) @ np.linalg.inv(S)).astype(np.float32)
        else:
            C = faiss_rq(D[pool] - mean, args.m, True)
        if kind == "distill":
            C = distill(D[pool], encoder(C)(D[pool] - mean), C, mean, int(arg))
        fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        if kind == "weighted":  # codes chosen in the scaled space
            codes = encoder((C @ S).astype(np.float32))((D - mean) @ S)
        else:
            codes = encoder(C, int(arg) if kind == "beam" else 1)(D - mean)
        if kind == "icm":
            codes, _ = icm_sweeps(D - decode(mean, C, codes), codes, C, int(arg))
        rate = len(D) / (time.perf_counter() - t0)
        X = decode(mean, C, codes)
        err = ((X - D) ** 2).sum(1)
        print(
            f"  {v:14s} {100 * ndcg(X) / ref:7.2f}% {err[unseen].mean():10.5f} {err[pool].mean():9.5f} {fit:6.1f} "
            f"{rate:10,.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
