/*
 * Exact top-k Hamming search over packed bits, for embcompress.search.
 *
 * topk(queries, docs, nbytes, k, doc_start, doc_end, out_dist, out_idx)
 *   queries : bytes-like, nq * nbytes       docs : bytes-like, nd * nbytes
 *   out_dist: writable int32, nq * k         out_idx: writable int64, nq * k
 * For every query, the k documents of [doc_start, doc_end) with the smallest Hamming distance,
 * sorted by (distance, index). Documents are scanned in increasing index order and a candidate
 * only enters a full heap when its distance is strictly smaller than the worst kept, so among
 * equal distances the lowest indices win: ties are broken by index without extra work.
 *
 * The scan is blocked: a block of documents small enough to stay in L2 is compared against a
 * block of queries before moving on, so each document byte is read from memory once per query
 * block instead of once per query. The GIL is released during the scan; the caller runs several
 * calls in parallel on disjoint query (or document) ranges.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_cext.h"

#define QBLOCK 32
#define DBLOCK_BYTES (256 * 1024)

static inline uint64_t load64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8); /* unaligned-safe; compiles to one load */
    return v;
}

/* distance between two rows of nbytes bytes */
static inline int32_t hamming_generic(const unsigned char *a, const unsigned char *b, Py_ssize_t nbytes) {
    int32_t d = 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= nbytes; i += 8) d += __builtin_popcountll(load64(a + i) ^ load64(b + i));
    for (; i < nbytes; i++) d += __builtin_popcount((unsigned)(a[i] ^ b[i]));
    return d;
}

/* fixed word counts let the compiler unroll the loop completely */
#define DEFINE_FIXED(W)                                                                          \
    static inline int32_t hamming_##W(const unsigned char *a, const unsigned char *b) {          \
        int32_t d = 0;                                                                           \
        for (int i = 0; i < W; i++) d += __builtin_popcountll(load64(a + 8 * i) ^ load64(b + 8 * i)); \
        return d;                                                                                \
    }
/* the widths of common embeddings' sign bits: 64 to 2,048 dimensions (384: 6 words, 1,536: 24),
   and the halves and quarters the report's PCA stages keep */
DEFINE_FIXED(1)
DEFINE_FIXED(2)
DEFINE_FIXED(3)
DEFINE_FIXED(4)
DEFINE_FIXED(6)
DEFINE_FIXED(8)
DEFINE_FIXED(12)
DEFINE_FIXED(16)
DEFINE_FIXED(24)
DEFINE_FIXED(32)

/* byte widths that are not whole words: the sign bits of 48 and 96 dimensions (the quarter and
   the eighth of 384, the width of the MiniLM family); the tail is a fixed-size load too */
#define DEFINE_BYTES(N)                                                                          \
    static inline int32_t hamming_b##N(const unsigned char *a, const unsigned char *b) {         \
        int32_t d = 0;                                                                           \
        for (int i = 0; i + 8 <= N; i += 8) d += __builtin_popcountll(load64(a + i) ^ load64(b + i)); \
        int i = N - N % 8;                                                                       \
        if (N % 8 >= 4) {                                                                        \
            uint32_t x, y;                                                                       \
            memcpy(&x, a + i, 4);                                                                \
            memcpy(&y, b + i, 4);                                                                \
            d += __builtin_popcount(x ^ y);                                                      \
            i += 4;                                                                              \
        }                                                                                        \
        if (N % 4 >= 2) {                                                                        \
            uint16_t x, y;                                                                       \
            memcpy(&x, a + i, 2);                                                                \
            memcpy(&y, b + i, 2);                                                                \
            d += __builtin_popcount((unsigned)(x ^ y));                                          \
            i += 2;                                                                              \
        }                                                                                        \
        if (N % 2) d += __builtin_popcount((unsigned)(a[i] ^ b[i]));                             \
        return d;                                                                                \
    }
DEFINE_BYTES(6)
DEFINE_BYTES(12)

/* the kept distances form a max-heap on (dist, idx): the root is the worst kept candidate */
#define DIST_WORSE(da, ia, db, ib) ((da) > (db) || ((da) == (db) && (ia) > (ib)))
EC_TOPK_HEAP(dist_heap, int32_t, DIST_WORSE)

#define SCAN_BLOCK(DISTFN)                                                                   \
    for (Py_ssize_t q = q0; q < q1; q++) {                                                   \
        const unsigned char *qp = Q + q * nbytes;                                            \
        int32_t *hd = dist + q * k;                                                          \
        int64_t *hi = idx + q * k;                                                           \
        int32_t worst = hd[0];                                                               \
        for (Py_ssize_t j = d0; j < d1; j++) {                                               \
            int32_t dd = DISTFN;                                                             \
            if (dd < worst) {                                                                \
                dist_heap_replace_root(hd, hi, k, dd, j);                                    \
                worst = hd[0];                                                               \
            }                                                                                \
        }                                                                                    \
    }

static void scan(const unsigned char *Q, Py_ssize_t nq, const unsigned char *D, Py_ssize_t doc_start,
                 Py_ssize_t doc_end, Py_ssize_t nbytes, Py_ssize_t k, int32_t *dist, int64_t *idx) {
    for (Py_ssize_t i = 0; i < nq * k; i++) {
        dist[i] = INT32_MAX;
        idx[i] = INT64_MAX;
    }
    Py_ssize_t dblock = DBLOCK_BYTES / nbytes;
    if (dblock < 64) dblock = 64;
    Py_ssize_t words = (nbytes % 8 == 0) ? nbytes / 8 : -nbytes; /* negative: a byte width */
    for (Py_ssize_t d0 = doc_start; d0 < doc_end; d0 += dblock) {
        Py_ssize_t d1 = d0 + dblock < doc_end ? d0 + dblock : doc_end;
        for (Py_ssize_t q0 = 0; q0 < nq; q0 += QBLOCK) {
            Py_ssize_t q1 = q0 + QBLOCK < nq ? q0 + QBLOCK : nq;
            switch (words) {
            case 1: SCAN_BLOCK(hamming_1(qp, D + j * nbytes)) break;
            case 2: SCAN_BLOCK(hamming_2(qp, D + j * nbytes)) break;
            case 3: SCAN_BLOCK(hamming_3(qp, D + j * nbytes)) break;
            case 4: SCAN_BLOCK(hamming_4(qp, D + j * nbytes)) break;
            case 6: SCAN_BLOCK(hamming_6(qp, D + j * nbytes)) break;
            case 8: SCAN_BLOCK(hamming_8(qp, D + j * nbytes)) break;
            case 12: SCAN_BLOCK(hamming_12(qp, D + j * nbytes)) break;
            case 16: SCAN_BLOCK(hamming_16(qp, D + j * nbytes)) break;
            case 24: SCAN_BLOCK(hamming_24(qp, D + j * nbytes)) break;
            case 32: SCAN_BLOCK(hamming_32(qp, D + j * nbytes)) break;
            case -6: SCAN_BLOCK(hamming_b6(qp, D + j * nbytes)) break;
            case -12: SCAN_BLOCK(hamming_b12(qp, D + j * nbytes)) break;
            default: SCAN_BLOCK(hamming_generic(qp, D + j * nbytes, nbytes)) break;
            }
        }
    }
    /* heap -> ascending (dist, idx) */
    for (Py_ssize_t q = 0; q < nq; q++) dist_heap_sort(dist + q * k, idx + q * k, k);
}

static PyObject *py_topk(PyObject *self, PyObject *args) {
    Py_buffer qb, db, odb, oib;
    Py_ssize_t nbytes, k, doc_start, doc_end;
    if (!PyArg_ParseTuple(args, "y*y*nnnnw*w*", &qb, &db, &nbytes, &k, &doc_start, &doc_end, &odb, &oib))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t nq = nbytes > 0 ? qb.len / nbytes : 0;
    Py_ssize_t nd = nbytes > 0 ? db.len / nbytes : 0;
    if (nbytes <= 0 || qb.len % nbytes || db.len % nbytes) {
        PyErr_SetString(PyExc_ValueError, "buffer sizes are not multiples of nbytes");
    } else if (k < 1 || doc_start < 0 || doc_end > nd || doc_end - doc_start < k) {
        PyErr_SetString(PyExc_ValueError, "need 1 <= k <= doc_end - doc_start and a document range inside docs");
    } else if (odb.len != (Py_ssize_t)(nq * k * sizeof(int32_t)) || oib.len != (Py_ssize_t)(nq * k * sizeof(int64_t))) {
        PyErr_SetString(PyExc_ValueError, "output buffers must hold nq * k int32 distances and int64 indices");
    } else {
        Py_BEGIN_ALLOW_THREADS
        scan((const unsigned char *)qb.buf, nq, (const unsigned char *)db.buf, doc_start, doc_end, nbytes, k,
             (int32_t *)odb.buf, (int64_t *)oib.buf);
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&qb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&odb);
    PyBuffer_Release(&oib);
    return result;
}

static PyMethodDef methods[] = {
    {"topk", py_topk, METH_VARARGS, "Exact top-k Hamming search over packed bits (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_hamming", "Blocked exact Hamming top-k.", -1, methods};

PyMODINIT_FUNC PyInit__hamming(void) { return PyModule_Create(&module); }
