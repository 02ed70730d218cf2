/*
 * Top-k over codes of 4-bit codebook indices (PQ, OPQ or RQ with 16 codewords per codebook),
 * scored with 8-bit tables held in vector registers: the "fast scan" of Andre, Kermarrec and
 * Le Scouarnec (VLDB 2015), which faiss ships as IndexPQFastScan. For embcompress.search.fastscan.
 *
 * blocks(codes, nbytes, out)
 *   codes: nrows * nbytes uint8, two indices per byte (codebook 2g in the low half of byte g, 2g + 1
 *   in the high half, as faiss packs them). out: ceil(nrows / 32) * nbytes * 32 uint8, the rows in
 *   blocks of 32, each block transposed: out[b][g][r] = codes[32 b + r][g]; rows past the end are 0.
 *   One 32-byte load then holds byte g of 32 rows.
 *
 * blocks_in_place(buf, nrows, nbytes)
 *   The same, in one buffer of ceil(nrows / 32) * nbytes * 32 bytes whose first nrows * nbytes are the
 *   rows: they become the blocks, and the rows are never held twice.
 *
 * topk(blocks, nbytes, nrows, luts, delta, base, scale, bias, qconst, k, doc_start, doc_end,
 *      out_score, out_idx)
 *   luts: nq * (2 nbytes) * 16 uint8, per query one 16-entry table per codebook (in index order).
 *   delta, base: float32 per query. A row's table sum S (an integer below 65,536: at most 256
 *   codebooks of entries up to 255) stands for the score delta * S + base; that times scale[j]
 *   when given, plus bias[j] * qconst[q] when given, is what the row is ranked by (the factors
 *   of embcompress.search.adc's scans). For each query, the k rows of [doc_start, doc_end) with
 *   the highest score, sorted by (score descending, index ascending); a range of at most 2^32 rows
 *   (embcompress.search.fastscan splits a longer one).
 *
 * The AVX2 path looks up 32 rows of one codebook with one byte shuffle (vpshufb: the 16 entries
 * sit in a register) and adds the entries in 16-bit lanes, even and odd rows apart; the portable
 * path adds the same integers one by one. The score's float arithmetic is the same in both,
 * multiplies and adds kept apart (built with -ffp-contract=off), so both paths give the same
 * results bit for bit. One query at a time scans the whole range, keeping its best in a buffer
 * (see reservoir below). The GIL is released; the caller splits a large scan over threads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../_cext.h"

#define ROWS 32                     /* rows per block: one AVX2 register of bytes */
#define MAX_BOOKS 256               /* 256 * 255 < 65,536: a table sum fits 16 bits */

#define MAX_SPAN ((Py_ssize_t)1 << 32) /* rows of one call's range: the reservoir's keys hold their offsets */

/* rows [32 b, 32 b + 32) of codes (the first `valid` of them there) into block b of out, transposed; rows
 * past `valid` are 0. A block's rows and the block itself take the same bytes of their buffers, so out may
 * be codes: each block's rows are copied aside before the block is written over them. */
static void transpose_blocks(const uint8_t *codes, Py_ssize_t nrows, Py_ssize_t nbytes, uint8_t *out) {
    uint8_t tile[ROWS * (MAX_BOOKS / 2)];
    Py_ssize_t nblocks = (nrows + ROWS - 1) / ROWS;
    for (Py_ssize_t b = 0; b < nblocks; b++) {
        Py_ssize_t valid = nrows - b * ROWS < ROWS ? nrows - b * ROWS : ROWS;
        memcpy(tile, codes + b * ROWS * nbytes, (size_t)(valid * nbytes));
        uint8_t *blk = out + b * ROWS * nbytes;
        for (Py_ssize_t g = 0; g < nbytes; g++)
            for (Py_ssize_t r = 0; r < ROWS; r++) blk[g * ROWS + r] = r < valid ? tile[r * nbytes + g] : 0;
    }
}

/* the 32 rows' table sums of one block, in row order */
static void block_sums_portable(const uint8_t *blk, const uint8_t *L, Py_ssize_t nbytes, uint16_t *S) {
    for (int r = 0; r < ROWS; r++) S[r] = 0;
    for (Py_ssize_t g = 0; g < nbytes; g++) {
        const uint8_t *c = blk + g * ROWS, *lo = L + 32 * g, *hi = lo + 16;
        for (int r = 0; r < ROWS; r++) S[r] = (uint16_t)(S[r] + lo[c[r] & 15] + hi[c[r] >> 4]);
    }
}

#ifdef HAVE_AVX2_PATH
#include <immintrin.h>
__attribute__((target("avx2"))) static void block_sums_avx2(const uint8_t *blk, const uint8_t *L, Py_ssize_t nbytes,
                                                            uint16_t *S) {
    const __m256i nib = _mm256_set1_epi8(0x0f), low = _mm256_set1_epi16(0x00ff);
    __m256i even = _mm256_setzero_si256(), odd = _mm256_setzero_si256(); /* rows 2i and 2i + 1 in lane i */
    for (Py_ssize_t g = 0; g < nbytes; g++) {
        __m256i c = _mm256_loadu_si256((const __m256i *)(blk + g * ROWS));
        __m256i tlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(L + 32 * g)));
        __m256i thi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(L + 32 * g + 16)));
        __m256i a = _mm256_shuffle_epi8(tlo, _mm256_and_si256(c, nib));
        __m256i b = _mm256_shuffle_epi8(thi, _mm256_and_si256(_mm256_srli_epi16(c, 4), nib));
        even = _mm256_add_epi16(even, _mm256_add_epi16(_mm256_and_si256(a, low), _mm256_and_si256(b, low)));
        odd = _mm256_add_epi16(odd, _mm256_add_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8)));
    }
    __m256i x = _mm256_unpacklo_epi16(even, odd); /* rows 0-7 | 16-23 */
    __m256i y = _mm256_unpackhi_epi16(even, odd); /* rows 8-15 | 24-31 */
    _mm256_storeu_si256((__m256i *)S, _mm256_permute2x128_si256(x, y, 0x20));
    _mm256_storeu_si256((__m256i *)(S + 16), _mm256_permute2x128_si256(x, y, 0x31));
}

/* the scores of a whole block's 32 rows into out, as the scalar loop in scan computes them (a multiply
   and an add apart, no fused operations), and the mask of those above thr */
__attribute__((target("avx2"))) static uint32_t block_scores_avx2(const uint16_t *S, float dq, float bq,
                                                                  const float *scale, const float *bias, float qc,
                                                                  float thr, float *out) {
    uint32_t mask = 0;
    const __m256 d = _mm256_set1_ps(dq), b = _mm256_set1_ps(bq), c = _mm256_set1_ps(qc), t = _mm256_set1_ps(thr);
    for (int i = 0; i < ROWS; i += 8) {
        __m256 s = _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(S + i))));
        s = _mm256_add_ps(_mm256_mul_ps(d, s), b);
        if (scale) s = _mm256_mul_ps(s, _mm256_loadu_ps(scale + i));
        if (bias) s = _mm256_add_ps(s, _mm256_mul_ps(_mm256_loadu_ps(bias + i), c));
        _mm256_storeu_ps(out + i, s);
        mask |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(s, t, _CMP_GT_OQ)) << i;
    }
    return mask;
}
#endif

typedef struct {
    const uint8_t *blocks;
    Py_ssize_t nbytes;
    const uint8_t *luts;  /* nq * 2 nbytes * 16 */
    const float *delta, *base, *scale, *bias, *qconst;
} scan_args;

/* a float's bits as an unsigned integer in the float's order (-0 first made +0, which it equals) */
static inline uint32_t float_order(float f) {
    uint32_t b;
    f = f == 0.0f ? 0.0f : f;
    memcpy(&b, &f, 4);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

static inline float order_float(uint32_t u) {
    uint32_t b = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* The k best of a stream of (score, row) in increasing row order, for k up to the thousands that a
   serving plan rescores. Each is one 64-bit key, the score's order inverted above the row's offset from
   the range's start (a range of at most 2^32 rows), so that a smaller key is a better pair, (score
   descending, row ascending), and one integer compare orders two. Offered rows better than a threshold
   go to a buffer of twice k; a full buffer keeps its k best (a selection, linear in the buffer) and the
   threshold becomes the worst of them. Rows come in increasing order, so a later row equal to the
   threshold ranks below it and is not kept. A heap of thousands would pay a sift per kept row; parallel
   arrays of scores and rows paid two compares and two swaps per step of the selection. */
typedef struct {
    uint64_t *key, *spare; /* spare: cap keys for the radix sort's other half */
    Py_ssize_t n, cap, k;
    float thr;
} reservoir;

static inline uint64_t res_key(float s, Py_ssize_t offset) {
    return ((uint64_t)(~float_order(s)) << 32) | (uint64_t)offset;
}

static inline void key_swap(uint64_t *key, Py_ssize_t a, Py_ssize_t b) {
    uint64_t t = key[a];
    key[a] = key[b];
    key[b] = t;
}

/* the buffer reordered so that its first k hold the k smallest keys, the k-th at k - 1 */
static void res_select(reservoir *r, Py_ssize_t k) {
    uint64_t *key = r->key;
    Py_ssize_t lo = 0, hi = r->n - 1, nth = k - 1;
    while (hi > lo) {
        Py_ssize_t mid = lo + (hi - lo) / 2; /* median of three as the pivot, kept at hi */
        if (key[mid] < key[lo]) key_swap(key, mid, lo);
        if (key[hi] < key[lo]) key_swap(key, hi, lo);
        if (key[mid] < key[hi]) key_swap(key, mid, hi);
        uint64_t pivot = key[hi];
        Py_ssize_t store = lo;
        for (Py_ssize_t j = lo; j < hi; j++) { /* without a branch: the keys from store to j - 1 are all above the pivot,
                                                 so a swap that is not kept only exchanges two of them */
            uint64_t v = key[j];
            key[j] = key[store];
            key[store] = v;
            store += v < pivot;
        }
        key_swap(key, store, hi);
        if (store == nth) return;
        if (store < nth) lo = store + 1;
        else hi = store - 1;
    }
}

static inline void res_offer(reservoir *r, float s, Py_ssize_t offset) {
    if (!(s > r->thr)) return;
    if (r->n == r->cap) {
        res_select(r, r->k);
        r->n = r->k;
        r->thr = order_float(~(uint32_t)(r->key[r->k - 1] >> 32));
        if (!(s > r->thr)) return;
    }
    r->key[r->n++] = res_key(s, offset);
}

/* the n keys sorted ascending in place: an insertion sort for a short list, else a radix sort of 8 bits a
   pass (a pass whose byte every key shares is skipped) through the spare buffer */
static void keys_sorted(uint64_t *key, uint64_t *spare, Py_ssize_t n) {
    if (n <= 64) {
        for (Py_ssize_t p = 1; p < n; p++) {
            uint64_t v = key[p];
            Py_ssize_t j = p;
            for (; j > 0 && key[j - 1] > v; j--) key[j] = key[j - 1];
            key[j] = v;
        }
        return;
    }
    uint64_t *src = key, *dst = spare;
    for (int shift = 0; shift < 64; shift += 8) {
        Py_ssize_t count[257] = {0};
        for (Py_ssize_t p = 0; p < n; p++) count[((src[p] >> shift) & 0xff) + 1]++;
        if (count[((src[0] >> shift) & 0xff) + 1] == n) continue; /* one byte for every key: nothing moves */
        for (int d = 0; d < 256; d++) count[d + 1] += count[d];
        for (Py_ssize_t p = 0; p < n; p++) dst[count[(src[p] >> shift) & 0xff]++] = src[p];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != key) memcpy(key, src, (size_t)n * sizeof(uint64_t));
}

/* the k best, best first, into out as (score, start + offset); places past the rows offered: -inf and
   INT64_MAX */
static void res_emit(reservoir *r, Py_ssize_t start, float *os, int64_t *oi) {
    Py_ssize_t n = r->n < r->k ? r->n : r->k;
    if (r->n > r->k) res_select(r, r->k);
    keys_sorted(r->key, r->spare, n);
    for (Py_ssize_t p = 0; p < n; p++) {
        os[p] = order_float(~(uint32_t)(r->key[p] >> 32));
        oi[p] = (int64_t)start + (int64_t)(r->key[p] & 0xffffffffu);
    }
    for (Py_ssize_t p = n; p < r->k; p++) {
        os[p] = -INFINITY;
        oi[p] = INT64_MAX;
    }
}

static int scan(const scan_args *a, Py_ssize_t nq, Py_ssize_t k, Py_ssize_t start, Py_ssize_t end, float *score,
                int64_t *idx, int fast) {
    reservoir r = {NULL, NULL, 0, 2 * k > k + 1024 ? 2 * k : k + 1024, k, -INFINITY};
    r.key = malloc(2 * (size_t)r.cap * sizeof(uint64_t));
    if (!r.key) return -1;
    r.spare = r.key + r.cap;
    Py_ssize_t nb = a->nbytes, last = (end + ROWS - 1) / ROWS; /* one past the last block of the range */
    uint16_t S[ROWS];
    float sc[ROWS];
    for (Py_ssize_t q = 0; q < nq; q++) {
        const uint8_t *L = a->luts + q * nb * 32;
        float dq = a->delta[q], bq = a->base[q], qc = a->bias ? a->qconst[q] : 0.0f;
        r.n = 0;
        r.thr = -INFINITY;
        for (Py_ssize_t b = start / ROWS; b < last; b++) {
            const uint8_t *blk = a->blocks + b * nb * ROWS;
#ifdef HAVE_AVX2_PATH
            if (fast) block_sums_avx2(blk, L, nb, S);
            else
#endif
                block_sums_portable(blk, L, nb, S);
            Py_ssize_t j0 = b * ROWS, r0 = j0 < start ? start - j0 : 0, r1 = end - j0 < ROWS ? end - j0 : ROWS;
#ifdef HAVE_AVX2_PATH
            if (fast && r0 == 0 && r1 == ROWS) { /* a whole block: scored at once, offered where above the threshold */
                uint32_t mask = block_scores_avx2(S, dq, bq, a->scale ? a->scale + j0 : NULL,
                                                  a->bias ? a->bias + j0 : NULL, qc, r.thr, sc);
                for (; mask; mask &= mask - 1) {
                    int t = __builtin_ctz(mask);
                    res_offer(&r, sc[t], j0 + t - start);
                }
                continue;
            }
#endif
            for (Py_ssize_t t = r0; t < r1; t++) {
                Py_ssize_t j = j0 + t;
                float s = dq * (float)S[t];
                s = s + bq;
                if (a->scale) s = s * a->scale[j];
                if (a->bias) s = s + a->bias[j] * qc;
                res_offer(&r, s, j - start);
            }
        }
        res_emit(&r, start, score + q * k, idx + q * k);
    }
    free(r.key);
    return 0;
}

static PyObject *py_blocks(PyObject *self, PyObject *args) {
    Py_buffer cb, ob;
    Py_ssize_t nbytes;
    if (!PyArg_ParseTuple(args, "y*nw*", &cb, &nbytes, &ob)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t nrows = nbytes > 0 ? cb.len / nbytes : 0;
    if (nbytes <= 0 || 2 * nbytes > MAX_BOOKS || cb.len % nbytes || ob.len != ((nrows + ROWS - 1) / ROWS) * nbytes * ROWS) {
        PyErr_SetString(PyExc_ValueError,
                        "codes must be nrows * nbytes bytes and out ceil(nrows / 32) * nbytes * 32, with 2 * nbytes <= 256");
    } else {
        Py_BEGIN_ALLOW_THREADS
        transpose_blocks((const uint8_t *)cb.buf, nrows, nbytes, (uint8_t *)ob.buf);
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&cb);
    PyBuffer_Release(&ob);
    return result;
}

static PyObject *py_blocks_in_place(PyObject *self, PyObject *args) {
    Py_buffer bb;
    Py_ssize_t nrows, nbytes;
    if (!PyArg_ParseTuple(args, "w*nn", &bb, &nrows, &nbytes)) return NULL;
    PyObject *result = NULL;
    if (nbytes <= 0 || 2 * nbytes > MAX_BOOKS || nrows < 0 || bb.len != ((nrows + ROWS - 1) / ROWS) * nbytes * ROWS) {
        PyErr_SetString(PyExc_ValueError,
                        "the buffer must be ceil(nrows / 32) * nbytes * 32 bytes, its first nrows * nbytes the rows, "
                        "with 2 * nbytes <= 256");
    } else {
        Py_BEGIN_ALLOW_THREADS
        transpose_blocks((const uint8_t *)bb.buf, nrows, nbytes, (uint8_t *)bb.buf);
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&bb);
    return result;
}

static PyObject *py_topk(PyObject *self, PyObject *args) {
    Py_buffer bb, lb, db, eb, sb, ib, qb, osb, oib;
    Py_ssize_t nbytes, nrows, k, start, end;
    int path;
    if (!PyArg_ParseTuple(args, "y*nny*y*y*y*y*y*nnnw*w*i", &bb, &nbytes, &nrows, &lb, &db, &eb, &sb, &ib, &qb, &k,
                          &start, &end, &osb, &oib, &path))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t nq = nbytes > 0 ? lb.len / (nbytes * 32) : 0;
    if (nbytes <= 0 || 2 * nbytes > MAX_BOOKS || nrows < 0 || bb.len != ((nrows + ROWS - 1) / ROWS) * nbytes * ROWS) {
        PyErr_SetString(PyExc_ValueError, "blocks must be ceil(nrows / 32) * nbytes * 32 bytes, with 2 * nbytes <= 256");
    } else if (lb.len != nq * nbytes * 32 || db.len != nq * 4 || eb.len != nq * 4) {
        PyErr_SetString(PyExc_ValueError, "luts must be nq * 2 nbytes * 16 uint8, delta and base nq float32");
    } else if ((sb.len && sb.len != nrows * 4) || (ib.len && (ib.len != nrows * 4 || qb.len != nq * 4))) {
        PyErr_SetString(PyExc_ValueError, "scale and bias need nrows float32, qconst nq float32 (with bias)");
    } else if (start < 0 || end > nrows || start >= end || k < 1 || k > end - start || end - start > MAX_SPAN) {
        PyErr_SetString(PyExc_ValueError, "need 0 <= doc_start < doc_end <= nrows, doc_end - doc_start <= 2^32 and "
                                          "1 <= k <= doc_end - doc_start");
    } else if (osb.len != nq * k * 4 || oib.len != nq * k * 8) {
        PyErr_SetString(PyExc_ValueError, "out_score must be nq * k float32 and out_idx nq * k int64");
    } else {
        scan_args a = {(const uint8_t *)bb.buf, nbytes, (const uint8_t *)lb.buf, (const float *)db.buf,
                       (const float *)eb.buf, sb.len ? (const float *)sb.buf : NULL,
                       ib.len ? (const float *)ib.buf : NULL, ib.len ? (const float *)qb.buf : NULL};
        int fast = path != 1 && use_avx2(); /* path 1: the portable one, to test it anywhere */
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = scan(&a, nq, k, start, end, (float *)osb.buf, (int64_t *)oib.buf, fast);
        Py_END_ALLOW_THREADS
        result = none_or_nomemory(rc);
    }
    PyBuffer_Release(&bb);
    PyBuffer_Release(&lb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&eb);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&ib);
    PyBuffer_Release(&qb);
    PyBuffer_Release(&osb);
    PyBuffer_Release(&oib);
    return result;
}

static PyObject *py_simd(PyObject *self, PyObject *noargs) { return PyUnicode_FromString(use_avx2() ? "avx2" : "portable"); }

static PyMethodDef methods[] = {
    {"blocks", py_blocks, METH_VARARGS, "Rows of 4-bit codes transposed into blocks of 32 (see the module source)."},
    {"blocks_in_place", py_blocks_in_place, METH_VARARGS,
     "Rows of 4-bit codes transposed into blocks of 32 in their own buffer (see the module source)."},
    {"topk", py_topk, METH_VARARGS, "Top-k over blocked 4-bit codes with 8-bit register tables (see the module source)."},
    {"simd", py_simd, METH_NOARGS, "Which path topk takes on this CPU: 'avx2' or 'portable'."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastscan", "Top-k over 4-bit codes, tables in registers.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__fastscan(void) { return PyModule_Create(&module); }
