from __future__ import annotations

import numpy as np

from embcompress.analysis import neighbour_recall
from embcompress.search import float_search, hamming_distances, hamming_search


def test_hamming_matches_reference_and_breaks_ties_by_index():
    rng = np.random.default_rng(0)
    d = rng.integers(0, 256, (300, 2), dtype=np.uint8)  # 16 bits: many ties
    q = rng.integers(0, 256, (7, 2), dtype=np.uint8)
    dist, idx = hamming_search(q, d, 20)
    bits_d = np.unpackbits(d, axis=1).astype(int)
    bits_q = np.unpackbits(q, axis=1).astype(int)
    for r in range(len(q)):
        ref = (bits_d != bits_q[r]).sum(axis=1)
        order = sorted(range(len(d)), key=lambda i: (ref[i], i))[:20]
        assert idx[r].tolist() == order
        assert dist[r].tolist() == [ref[i] for i in order]
    np.testing.assert_array_equal(hamming_distances(q, d)[0], (bits_d != bits_q[0]).sum(axis=1))


def test_k_larger_than_corpus_returns_all_without_padding():
    d = np.array([[1], [3], [1]], dtype=np.uint8)
    dist, idx = hamming_search(np.array([[1]], dtype=np.uint8), d, 10)
    assert idx.tolist() == [[0, 2, 1]] and dist.tolist() == [[0, 0, 1]]
    s, i = float_search(np.ones((1, 2), np.float32), np.array([[1, 0], [0, 1], [2, 2]], np.float32), 5)
    assert i.tolist() == [[2, 0, 1]]


def test_float_search_ties_by_index():
    docs = np.array([[1, 0], [1, 0], [0, 1], [1, 0]], dtype=np.float32)
    s, i = float_search(np.array([[1, 0]], np.float32), docs, 2)
    assert i.tolist() == [[0, 1]]


def test_neighbour_recall():
    ref = np.array([[0, 1, 2], [3, 4, 5]])
    found = np.array([[2, 1, 9], [7, 8, 9]])
    assert neighbour_recall(ref, found) == (2 / 3 + 0) / 2
