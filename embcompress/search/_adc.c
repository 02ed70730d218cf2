/*
 * Exact top-k search over byte codes scored with lookup tables (asymmetric distance
 * computation, ADC), for embcompress.search.
 *
 * topk(codes, tables, scale, bias, qconst, nbytes, k, doc_start, doc_end, out_score, out_idx)
 *   codes : bytes-like, nd * nbytes uint8       tables : float32, nq * nbytes * 256
 *   scale, bias : float32 per document (nd values each), or empty buffers for none
 *   qconst: float32 per query (nq values), used with bias
 *   out_score: writable float32, nq * k          out_idx: writable int64, nq * k
 * The score of document j for query q is  sum_b tables[q][b][codes[j][b]], times scale[j] when
 * given, plus bias[j] * qconst[q] when given (a cosine with a reconstruction: the per-document
 * inverse norm in both, the query's inner product with the reconstruction offset in qconst). For every query, the k documents of [doc_start, doc_end) with the highest score, sorted
 * by (score descending, index ascending). Documents are scanned in increasing index order and a
 * candidate only enters a full heap when its score is strictly higher than the worst kept, so
 * ties are broken by the lowest index without extra work.
 *
 * The scan is blocked: a block of documents small enough to stay in L2 is scored against every
 * query before moving on; one query's tables (nbytes KiB) stay in L1/L2 while its block is
 * scanned. The GIL is released; the caller runs several calls in parallel on disjoint ranges.
 *
 * dense_topk(codes, row_bytes, layout, bits, d, levels, queries, scale, bias, qconst, k,
 *            doc_start, doc_end, out_score, out_idx)
 *   The same top-k for codes of one small integer u_j < 2^bits per dimension, scored as the
 *   inner product of a float query (nq * d float32) with the decoded vector levels[j][u_j]
 *   (levels: d * 2^bits float32), times scale and plus bias * qconst as above. layout 0: bits
 *   bit-planes of ceil(d / 8) bytes each, most significant plane first (RaBitQ); layout 1: the
 *   codes packed 8 / bits per byte, the first dimension in the high bits (few-bit SQ). A block
 *   of documents is decoded to floats once and scored against every query, four queries per
 *   pass over a document: d multiply-adds per pair instead of d * bits / 8 table lookups into
 *   tables that outgrow the caches when codes are long (RaBitQ or SQ with 4 bits, 192 bytes at
 *   384 dimensions). The sums use eight lanes in a fixed order, with multiplies and adds kept
 *   apart (built with -ffp-contract=off), so the AVX2 path chosen at run time and the portable
 *   one give the same scores bit for bit.
 *
 * rows_topk(scores, ncols, k, offset, out_score, out_idx)
 *   The same top-k of each row of a (nrows, ncols) float32 score matrix computed elsewhere (a
 *   float or decoded-code block product): one pass, a candidate enters only when strictly better
 *   than the worst kept, so the order is (score descending, column ascending) as everywhere;
 *   offset is added to the columns. A row holding fewer than k scores above -inf (or NaNs) keeps
 *   INT64_MAX in its last places, which the caller resolves.
 *
 * dense_decode(codes, row_bytes, layout, bits, d, levels, out)
 *   Per-dimension codes (as dense_topk) decoded to nd * d float32 levels[j][u_j], for the scans
 *   that multiply decoded blocks with a large batch of queries by BLAS.
 *
 * book_decode(idx, m, books, ksub, w, add, out)
 *   Rows of m codeword indices (uint8, each below ksub) into books (m * ksub * w float32):
 *   add = 0, each row's codewords side by side (n * m * w, product quantization); add = 1, their
 *   sum (n * w, residual and additive quantizers), added in codebook order.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../_cext.h"

#define DBLOCK_BYTES (128 * 1024)

/* the kept scores form a min-heap on (score, -idx): the root is the worst kept candidate */
#define SCORE_WORSE(sa, ia, sb, ib) ((sa) < (sb) || ((sa) == (sb) && (ia) > (ib)))
EC_TOPK_HEAP(score_heap, float, SCORE_WORSE)

/* sum of one document's table entries, four independent accumulators */
static inline float adc_score(const float *T, const unsigned char *c, Py_ssize_t nbytes) {
    float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    Py_ssize_t b = 0;
    for (; b + 4 <= nbytes; b += 4) {
        a0 += T[(b + 0) * 256 + c[b + 0]];
        a1 += T[(b + 1) * 256 + c[b + 1]];
        a2 += T[(b + 2) * 256 + c[b + 2]];
        a3 += T[(b + 3) * 256 + c[b + 3]];
    }
    for (; b < nbytes; b++) a0 += T[b * 256 + c[b]];
    return (a0 + a1) + (a2 + a3);
}

static void heap_init(float *score, int64_t *idx, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        score[i] = -INFINITY;
        idx[i] = INT64_MAX;
    }
}

/* heaps -> descending (score, ascending idx) */
static void heap_sort_all(float *score, int64_t *idx, Py_ssize_t nq, Py_ssize_t k) {
    for (Py_ssize_t q = 0; q < nq; q++) score_heap_sort(score + q * k, idx + q * k, k);
}

/* offer document j to a heap of k whose root is the worst kept, with its score: the kernel's
   sum s, times scale[j] when given, plus bias[j] * qc when given (both scans compose it so).
   Documents come in increasing index order, so a tie never displaces an earlier document. */
static inline void heap_offer(float *hs, int64_t *hi, Py_ssize_t k, float s, Py_ssize_t j, const float *scale,
                              const float *bias, float qc) {
    if (scale) s *= scale[j];
    if (bias) s += bias[j] * qc;
    if (s > hs[0]) score_heap_replace_root(hs, hi, k, s, j);
}

static void scan(const unsigned char *D, const float *T, const float *scale, const float *bias, const float *qconst,
                 Py_ssize_t nq, Py_ssize_t nbytes,
                 Py_ssize_t k, Py_ssize_t doc_start, Py_ssize_t doc_end, float *score, int64_t *idx) {
    heap_init(score, idx, nq * k);
    Py_ssize_t dblock = DBLOCK_BYTES / nbytes;
    if (dblock < 64) dblock = 64;
    for (Py_ssize_t d0 = doc_start; d0 < doc_end; d0 += dblock) {
        Py_ssize_t d1 = d0 + dblock < doc_end ? d0 + dblock : doc_end;
        for (Py_ssize_t q = 0; q < nq; q++) {
            const float *Tq = T + q * nbytes * 256;
            float *hs = score + q * k;
            int64_t *hi = idx + q * k;
            float qc = bias ? qconst[q] : 0.0f;
            for (Py_ssize_t j = d0; j < d1; j++)
                heap_offer(hs, hi, k, adc_score(Tq, D + j * nbytes, nbytes), j, scale, bias, qc);
        }
    }
    heap_sort_all(score, idx, nq, k);
}

/* the checks both entry points share: per-document factors, the document range and k, the
   outputs; 0, or -1 with a ValueError set */
static int check_common(Py_ssize_t nd, Py_ssize_t nq, const Py_buffer *sb, const Py_buffer *bb, const Py_buffer *qcb,
                        Py_ssize_t k, Py_ssize_t doc_start, Py_ssize_t doc_end, const Py_buffer *osb, const Py_buffer *oib) {
    const char *msg = NULL;
    if ((sb->len != 0 && sb->len != (Py_ssize_t)(nd * sizeof(float))) || (bb->len != 0 && bb->len != (Py_ssize_t)(nd * sizeof(float))))
        msg = "scale and bias must hold one float32 per document, or nothing";
    else if (bb->len != 0 && qcb->len != (Py_ssize_t)(nq * sizeof(float)))
        msg = "qconst must hold one float32 per query when bias is given";
    else if (k < 1 || doc_start < 0 || doc_end > nd || doc_end - doc_start < k)
        msg = "need 1 <= k <= doc_end - doc_start and a document range inside codes";
    else if (osb->len != (Py_ssize_t)(nq * k * sizeof(float)) || oib->len != (Py_ssize_t)(nq * k * sizeof(int64_t)))
        msg = "output buffers must hold nq * k float32 scores and int64 indices";
    if (msg) PyErr_SetString(PyExc_ValueError, msg);
    return msg ? -1 : 0;
}

/* ---- dense scan: per-dimension codes decoded to floats, then multiply-adds ------------------ */

#define DENSE_BLOCK_BYTES (192 * 1024)
#define LANES 8

/* rows [j0, j1) of codes decoded into out ((j1 - j0) * dpad floats, zero past d) */
static void decode_rows(const unsigned char *codes, Py_ssize_t row_bytes, int layout, int bits, Py_ssize_t d,
                        Py_ssize_t dpad, const float *levels, Py_ssize_t j0, Py_ssize_t j1, float *out) {
    const Py_ssize_t L = (Py_ssize_t)1 << bits, plane = (d + 7) / 8;
    const int per = 8 / bits;
    const unsigned mask = (unsigned)L - 1;
    for (Py_ssize_t r = j0; r < j1; r++) {
        const unsigned char *c = codes + r * row_bytes;
        float *o = out + (r - j0) * dpad;
        if (layout == 0) {
            for (Py_ssize_t b = 0; b < plane; b++) {
                unsigned u[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (int p = 0; p < bits; p++) {
                    unsigned v = c[p * plane + b];
                    for (int t = 0; t < 8; t++) u[t] = (u[t] << 1) | ((v >> (7 - t)) & 1u);
                }
                for (int t = 0; t < 8 && b * 8 + t < d; t++) o[b * 8 + t] = levels[(b * 8 + t) * L + u[t]];
            }
        } else {
            for (Py_ssize_t j = 0; j < d; j++) {
                unsigned u = (c[j / per] >> (bits * (per - 1 - (int)(j % per)))) & mask;
                o[j] = levels[j * L + u];
            }
        }
        for (Py_ssize_t j = d; j < dpad; j++) o[j] = 0.0f;
    }
}

/* eight float lanes; with the default target GCC and Clang lower each operation to two SSE
   instructions, in the AVX2 path to one: the same arithmetic, lane by lane */
typedef float v8f __attribute__((vector_size(32)));

static inline float lane_sum(v8f a) {
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* inner products of four queries with one decoded document (all 32-byte aligned, dpad floats) */
static inline __attribute__((always_inline)) void dots4(const float *q0, const float *q1, const float *q2,
                                                        const float *q3, const float *x, Py_ssize_t dpad, float *out) {
    v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (Py_ssize_t i = 0; i < dpad; i += LANES) {
        v8f xv = *(const v8f *)(x + i);
        a0 += *(const v8f *)(q0 + i) * xv;
        a1 += *(const v8f *)(q1 + i) * xv;
        a2 += *(const v8f *)(q2 + i) * xv;
        a3 += *(const v8f *)(q3 + i) * xv;
    }
    out[0] = lane_sum(a0);
    out[1] = lane_sum(a1);
    out[2] = lane_sum(a2);
    out[3] = lane_sum(a3);
}

/* one block of decoded documents (rows j0.. of X) against every query (Q: nq * dpad) */
static inline __attribute__((always_inline)) void dense_block_body(
        const float *X, Py_ssize_t j0, Py_ssize_t nrows, const float *Q, Py_ssize_t nq, Py_ssize_t dpad,
        const float *scale, const float *bias, const float *qconst, Py_ssize_t k, float *score, int64_t *idx) {
    for (Py_ssize_t q = 0; q < nq; q += 4) {
        Py_ssize_t m = nq - q < 4 ? nq - q : 4;
        /* short groups repeat their last query; its extra results are not kept */
        const float *qs[4];
        for (int t = 0; t < 4; t++) qs[t] = Q + (q + (t < m ? t : m - 1)) * dpad;
        for (Py_ssize_t r = 0; r < nrows; r++) {
            float s[4];
            Py_ssize_t j = j0 + r;
            dots4(qs[0], qs[1], qs[2], qs[3], X + r * dpad, dpad, s);
            for (int t = 0; t < m; t++)
                heap_offer(score + (q + t) * k, idx + (q + t) * k, k, s[t], j, scale, bias, bias ? qconst[q + t] : 0.0f);
        }
    }
}

static void dense_block_portable(const float *X, Py_ssize_t j0, Py_ssize_t nrows, const float *Q, Py_ssize_t nq,
                                 Py_ssize_t dpad, const float *scale, const float *bias, const float *qconst,
                                 Py_ssize_t k, float *score, int64_t *idx) {
    dense_block_body(X, j0, nrows, Q, nq, dpad, scale, bias, qconst, k, score, idx);
}

#ifdef HAVE_AVX2_PATH
__attribute__((target("avx2"))) static void dense_block_avx2(
        const float *X, Py_ssize_t j0, Py_ssize_t nrows, const float *Q, Py_ssize_t nq, Py_ssize_t dpad,
        const float *scale, const float *bias, const float *qconst, Py_ssize_t k, float *score, int64_t *idx) {
    dense_block_body(X, j0, nrows, Q, nq, dpad, scale, bias, qconst, k, score, idx);
}
#endif

/* returns 0, or -1 when a buffer could not be allocated */
static int dense_scan(const unsigned char *codes, Py_ssize_t row_bytes, int layout, int bits, Py_ssize_t d,
                      const float *levels, const float *Qin, Py_ssize_t nq, const float *scale, const float *bias,
                      const float *qconst, Py_ssize_t k, Py_ssize_t doc_start, Py_ssize_t doc_end, int portable,
                      float *score, int64_t *idx) {
    const Py_ssize_t dpad = (d + LANES - 1) / LANES * LANES;
    Py_ssize_t dblock = DENSE_BLOCK_BYTES / (dpad * (Py_ssize_t)sizeof(float));
    if (dblock < 16) dblock = 16;
    float *X = aligned_alloc(32, (size_t)(dblock * dpad) * sizeof(float)); /* dpad * 4 is a multiple of 32 */
    float *Q = aligned_alloc(32, (size_t)((nq > 0 ? nq : 1) * dpad) * sizeof(float));
    if (!X || !Q) {
        free(X);
        free(Q);
        return -1;
    }
    for (Py_ssize_t q = 0; q < nq; q++) {
        memcpy(Q + q * dpad, Qin + q * d, (size_t)d * sizeof(float));
        for (Py_ssize_t j = d; j < dpad; j++) Q[q * dpad + j] = 0.0f;
    }
    heap_init(score, idx, nq * k);
    int fast = !portable && use_avx2(); /* 0 where no AVX2 path was compiled */
    for (Py_ssize_t d0 = doc_start; d0 < doc_end; d0 += dblock) {
        Py_ssize_t d1 = d0 + dblock < doc_end ? d0 + dblock : doc_end;
        decode_rows(codes, row_bytes, layout, bits, d, dpad, levels, d0, d1, X);
#ifdef HAVE_AVX2_PATH
        if (fast) {
            dense_block_avx2(X, d0, d1 - d0, Q, nq, dpad, scale, bias, qconst, k, score, idx);
            continue;
        }
#endif
        (void)fast;
        dense_block_portable(X, d0, d1 - d0, Q, nq, dpad, scale, bias, qconst, k, score, idx);
    }
    heap_sort_all(score, idx, nq, k);
    free(X);
    free(Q);
    return 0;
}

/* the codes of dense_topk and dense_decode: len bytes of rows of row_bytes holding d codes of
   1 to 8 bits in layout 0 (planes) or 1 (packed); 0, or -1 with a ValueError set */
static int check_dense_codes(Py_ssize_t len, Py_ssize_t row_bytes, int layout, int bits, Py_ssize_t d) {
    Py_ssize_t need = 0;
    if (bits >= 1 && bits <= 8 && d > 0)
        need = layout == 0 ? bits * ((d + 7) / 8) : (8 % bits == 0 ? (d * bits + 7) / 8 : -1);
    if (row_bytes <= 0 || len % row_bytes || (layout != 0 && layout != 1) || need <= 0 || row_bytes < need) {
        PyErr_SetString(PyExc_ValueError, "codes must be nd * row_bytes bytes holding d codes of 1 to 8 bits in layout 0 (planes) or 1 (packed)");
        return -1;
    }
    return 0;
}

static PyObject *py_dense_topk(PyObject *self, PyObject *args) {
    Py_buffer cb, lb, qb, sb, bb, kb, osb, oib;
    Py_ssize_t row_bytes, d, k, doc_start, doc_end;
    int layout, bits, portable;
    if (!PyArg_ParseTuple(args, "y*niiny*y*y*y*y*nnnpw*w*", &cb, &row_bytes, &layout, &bits, &d, &lb, &qb, &sb, &bb,
                          &kb, &k, &doc_start, &doc_end, &portable, &osb, &oib))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t nd = row_bytes > 0 ? cb.len / row_bytes : 0;
    Py_ssize_t nq = d > 0 ? qb.len / (d * (Py_ssize_t)sizeof(float)) : 0;
    if (check_dense_codes(cb.len, row_bytes, layout, bits, d) != 0) {
        /* the error is set */
    } else if (lb.len != (Py_ssize_t)(d * ((Py_ssize_t)1 << bits) * sizeof(float)) || qb.len % (d * (Py_ssize_t)sizeof(float))) {
        PyErr_SetString(PyExc_ValueError, "levels must be d * 2^bits float32 and queries nq * d float32");
    } else if (check_common(nd, nq, &sb, &bb, &kb, k, doc_start, doc_end, &osb, &oib) == 0) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = dense_scan((const unsigned char *)cb.buf, row_bytes, layout, bits, d, (const float *)lb.buf,
                        (const float *)qb.buf, nq, sb.len ? (const float *)sb.buf : NULL,
                        bb.len ? (const float *)bb.buf : NULL, bb.len ? (const float *)kb.buf : NULL, k, doc_start,
                        doc_end, portable, (float *)osb.buf, (int64_t *)oib.buf);
        Py_END_ALLOW_THREADS
        result = none_or_nomemory(rc);
    }
    PyBuffer_Release(&cb);
    PyBuffer_Release(&lb);
    PyBuffer_Release(&qb);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&osb);
    PyBuffer_Release(&oib);
    return result;
}

/* ---- bit-plane codes against queries quantized to 8 bits (RaBitQ) ----------------------------- */

#define PLANE_CHUNK 32  /* dimensions per step: one AVX2 register of bytes */
#define PLANE_BLOCK 128 /* documents decoded at a time, then scored against every query */

/* a row of bit-planes (pb bytes each, most significant first) as one byte per dimension,
   u[0..dpad), zero past pb * 8, in bit order: u[8b + t] is the code of the dimension held by
   bit t of byte b (dimension 8b + 7 - t, packbits being most significant bit first), the order
   in which a byte of bits becomes eight lanes; the queries come in the same order */
static void planes_unpack_portable(const unsigned char *c, int bits, Py_ssize_t pb, Py_ssize_t dpad, uint8_t *u) {
    memset(u, 0, (size_t)dpad);
    for (int p = 0; p < bits; p++)
        for (Py_ssize_t b = 0; b < pb; b++) {
            unsigned v = c[p * pb + b];
            for (int t = 0; t < 8; t++) u[b * 8 + t] = (uint8_t)((u[b * 8 + t] << 1) | ((v >> t) & 1u));
        }
}

static int32_t planes_dot1_portable(const uint8_t *u, const int8_t *q, Py_ssize_t dpad) {
    int32_t a = 0;
    for (Py_ssize_t j = 0; j < dpad; j++) a += (int32_t)u[j] * q[j];
    return a;
}

static void planes_dots4_portable(const uint8_t *u, const int8_t *const *qs, Py_ssize_t dpad, int32_t *out) {
    for (int t = 0; t < 4; t++) out[t] = planes_dot1_portable(u, qs[t], dpad);
}

/* a plane's 4 bytes at b (fewer at the row's end, zero-filled) */
static inline uint32_t plane_word(const unsigned char *c, Py_ssize_t b, Py_ssize_t pb) {
    uint32_t x = 0;
    if (pb - b >= 4)
        memcpy(&x, c + b, 4);
    else
        memcpy(&x, c + b, (size_t)(pb - b));
    return x;
}

#ifdef HAVE_AVX2_PATH
#include <immintrin.h>
#define AVX2_TARGET __attribute__((target("avx2")))

/* one 32-dimension chunk's codes (dimensions i..i+31) as one byte per dimension: each plane's 4
   bytes spread over the lanes, each lane's bit tested, folded in as u = 2u + bit */
AVX2_TARGET static inline __attribute__((always_inline)) __m256i plane_chunk_avx2(const unsigned char *c, const int BITS,
                                                                                  Py_ssize_t pb, Py_ssize_t i) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128,
                                         1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    __m256i u = _mm256_setzero_si256();
    for (int p = 0; p < BITS; p++) {
        __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)plane_word(c + p * pb, i / 8, pb)), spread);
        u = _mm256_sub_epi8(_mm256_add_epi8(u, u), _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit));
    }
    return u;
}

/* the same bytes as planes_unpack_portable, a chunk at a time */
AVX2_TARGET static void planes_unpack_avx2(const unsigned char *c, int bits, Py_ssize_t pb, Py_ssize_t dpad, uint8_t *u) {
    for (Py_ssize_t j = 0; j < dpad; j += PLANE_CHUNK)
        _mm256_storeu_si256((__m256i *)(u + j), plane_chunk_avx2(c, bits, pb, j));
}

__attribute__((target("avx2"))) static inline int32_t hsum_epi32_avx2(__m256i a) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    return _mm_cvtsi128_si32(h);
}

/* a loop over a group's queries (G of them, at most 4, a constant where it is used), unrolled so
   that its registers stay registers: left to the compiler, the four-query dots ran 6-8% slower */
#define FOR_QUERY(t, G) _Pragma("GCC unroll 4") for (int t = 0; t < (G); t++)

/* <u, q> of one document with G queries at once (G = 1 or 4, a constant in each instance; each u
   chunk loaded once), exactly: u < 16 and |q| <= 127 keep a pair's sum in 16 bits, and eight
   chunks' sums too */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) void planes_dots_body_avx2(
        const uint8_t *u, const int8_t *const *qs, Py_ssize_t dpad, int32_t *out, const int G) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i a[4];
    FOR_QUERY(t, G) a[t] = _mm256_setzero_si256();
    for (Py_ssize_t j = 0; j < dpad;) {
        __m256i s16[4];
        FOR_QUERY(t, G) s16[t] = _mm256_setzero_si256();
        for (int r = 0; r < 8 && j < dpad; r++, j += PLANE_CHUNK) {
            __m256i uv = _mm256_loadu_si256((const __m256i *)(u + j));
            FOR_QUERY(t, G)
                s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(uv, _mm256_loadu_si256((const __m256i *)(qs[t] + j))));
        }
        FOR_QUERY(t, G) a[t] = _mm256_add_epi32(a[t], _mm256_madd_epi16(s16[t], ones));
    }
    FOR_QUERY(t, G) out[t] = hsum_epi32_avx2(a[t]);
}

__attribute__((target("avx2"))) static int32_t planes_dot1_avx2(const uint8_t *u, const int8_t *q, Py_ssize_t dpad) {
    int32_t out;
    planes_dots_body_avx2(u, &q, dpad, &out, 1);
    return out;
}

__attribute__((target("avx2"))) static void planes_dots4_avx2(const uint8_t *u, const int8_t *const *qs,
                                                               Py_ssize_t dpad, int32_t *out) {
    planes_dots_body_avx2(u, qs, dpad, out, 4);
}

/* the whole scan of documents [j0, j1) for at most four queries, fused: each 32-dimension chunk's u
   built in a register from the planes' bits and multiplied with one query, or up to four at once,
   nothing stored between (with more queries, unpacking each document once into a buffer costs
   less); the same integer sums as the other paths, so the same scores. AVX-512 (BW, VL) builds u
   with the planes' bits as lane masks, AVX2 spreads each plane's 4 bytes over the lanes and tests
   each lane's bit (plane_chunk_avx2, which planes_unpack_avx2 stores). BITS and FOUR are constants in each instance
   (planes_block_* picks it), so the loops over planes and queries unroll. */
#define AVX512_TARGET __attribute__((target("avx2,avx512f,avx512bw,avx512vl")))
AVX512_TARGET static inline __attribute__((always_inline)) __m256i plane_chunk_avx512(const unsigned char *c, const int BITS,
                                                                                      Py_ssize_t pb, Py_ssize_t i) {
    const __m256i minus1 = _mm256_set1_epi8(-1);
    __m256i u = _mm256_setzero_si256();
    for (int p = 0; p < BITS; p++) {
        u = _mm256_add_epi8(u, u);
        u = _mm256_mask_sub_epi8(u, (__mmask32)plane_word(c + p * pb, i / 8, pb), u, minus1);
    }
    return u;
}

#define DEFINE_PLANES_BODY(NAME, TARGET, CHUNK)                                                                        \
TARGET static inline __attribute__((always_inline)) void NAME(                                                        \
        const unsigned char *codes, Py_ssize_t row_bytes, const int BITS, const int FOUR, Py_ssize_t pb, Py_ssize_t j0, \
        Py_ssize_t j1, const int8_t *Q8, Py_ssize_t nq, Py_ssize_t dpad, const float *dq, const float *off,          \
        const float *scale, const float *bias, const float *qconst, Py_ssize_t k, float *score, int64_t *idx) {      \
    const __m256i ones = _mm256_set1_epi16(1);                                                                        \
    const int G = FOUR ? 4 : 1;                                                                                       \
    for (Py_ssize_t q = 0; q < nq; q += G) {                                                                          \
        Py_ssize_t m = nq - q < G ? nq - q : G;                                                                       \
        const int8_t *qs[4]; /* short groups repeat their last query; its extra results are not kept */              \
        FOR_QUERY(t, G) qs[t] = Q8 + (q + (t < m ? t : m - 1)) * dpad;                                                \
        for (Py_ssize_t j = j0; j < j1; j++) {                                                                        \
            const unsigned char *c = codes + j * row_bytes;                                                           \
            __m256i a[4];                                                                                             \
            FOR_QUERY(t, G) a[t] = _mm256_setzero_si256();                                                            \
            for (Py_ssize_t i = 0; i < dpad;) {                                                                       \
                __m256i s16[4];                                                                                       \
                FOR_QUERY(t, G) s16[t] = _mm256_setzero_si256();                                                      \
                for (int r = 0; r < 8 && i < dpad; r++, i += PLANE_CHUNK) {                                           \
                    __m256i u = CHUNK(c, BITS, pb, i);                                                                \
                    FOR_QUERY(t, G)                                                                                   \
                        s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(qs[t] + i)))); \
                }                                                                                                     \
                FOR_QUERY(t, G) a[t] = _mm256_add_epi32(a[t], _mm256_madd_epi16(s16[t], ones));                       \
            }                                                                                                         \
            for (Py_ssize_t t = 0; t < m; t++)                                                                        \
                heap_offer(score + (q + t) * k, idx + (q + t) * k, k, (float)hsum_epi32_avx2(a[t]) * dq[q + t] + off[q + t], \
                           j, scale, bias, bias ? qconst[q + t] : 0.0f);                                              \
        }                                                                                                             \
    }                                                                                                                 \
}

/* one instance per plane count, with one query or four at a time */
#define DEFINE_PLANES_BLOCK(NAME, TARGET, BODY)                                                                        \
TARGET static void NAME(const unsigned char *codes, Py_ssize_t row_bytes, int bits, Py_ssize_t pb, Py_ssize_t j0,     \
                        Py_ssize_t j1, const int8_t *Q8, Py_ssize_t nq, Py_ssize_t dpad, const float *dq,             \
                        const float *off, const float *scale, const float *bias, const float *qconst, Py_ssize_t k,   \
                        float *score, int64_t *idx) {                                                                 \
    switch (bits) {                                                                                                   \
        PLANES_CASE(BODY, 1)                                                                                          \
        PLANES_CASE(BODY, 2)                                                                                          \
        PLANES_CASE(BODY, 3)                                                                                          \
        PLANES_CASE(BODY, 4)                                                                                          \
    }                                                                                                                 \
}
#define PLANES_CASE(BODY, B)                                                                                           \
    case B:                                                                                                           \
        if (nq > 1)                                                                                                   \
            BODY(codes, row_bytes, B, 1, pb, j0, j1, Q8, nq, dpad, dq, off, scale, bias, qconst, k, score, idx);      \
        else                                                                                                          \
            BODY(codes, row_bytes, B, 0, pb, j0, j1, Q8, nq, dpad, dq, off, scale, bias, qconst, k, score, idx);      \
        break;

DEFINE_PLANES_BODY(planes_body_avx512, AVX512_TARGET, plane_chunk_avx512)
DEFINE_PLANES_BODY(planes_body_avx2, AVX2_TARGET, plane_chunk_avx2)
DEFINE_PLANES_BLOCK(planes_block_avx512, AVX512_TARGET, planes_body_avx512)
DEFINE_PLANES_BLOCK(planes_block_avx2, AVX2_TARGET, planes_body_avx2)
#undef PLANES_CASE
#endif

static inline int use_avx512bw(void) {
#ifdef HAVE_AVX2_PATH
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") ? 1 : 0;
    }
    return cached;
#else
    return 0;
#endif
}

/* top-k of rows of bit-planes for queries quantized to 8 bits (nq * dpad int8, zero past the
   dimensions): a document's score is (<q8, u> * dq[q] + off[q]), times scale, plus bias * qconst.
   The integer part is exact, so both paths give the same scores. 0, or -1 without memory. */
static int planes_scan(const unsigned char *codes, Py_ssize_t row_bytes, int bits, Py_ssize_t pb, const int8_t *Q8,
                       Py_ssize_t dpad, const float *dq, const float *off, Py_ssize_t nq, const float *scale,
                       const float *bias, const float *qconst, Py_ssize_t k, Py_ssize_t doc_start,
                       Py_ssize_t doc_end, int path, float *score, int64_t *idx) {
    /* path 0: the best this CPU has; 1: portable; 2: at most AVX2 (to test that path anywhere) */
    int fast = path != 1 && use_avx2(), fused = fast && nq <= 4, wide = path == 0 && fused && use_avx512bw();
    uint8_t *U = fused ? NULL : aligned_alloc(32, (size_t)(PLANE_BLOCK * dpad)); /* the fused paths store nothing */
    if (!fused && !U) return -1;
    heap_init(score, idx, nq * k);
    for (Py_ssize_t d0 = doc_start; d0 < doc_end; d0 += PLANE_BLOCK) {
        Py_ssize_t d1 = d0 + PLANE_BLOCK < doc_end ? d0 + PLANE_BLOCK : doc_end;
#ifdef HAVE_AVX2_PATH
        if (fused) { /* at most four queries; with more, each document is unpacked once, below */
            (wide ? planes_block_avx512 : planes_block_avx2)(codes, row_bytes, bits, pb, d0, d1, Q8, nq, dpad, dq, off,
                                                             scale, bias, qconst, k, score, idx);
            continue;
        }
#endif
        for (Py_ssize_t j = d0; j < d1; j++) {
#ifdef HAVE_AVX2_PATH
            if (fast) {
                planes_unpack_avx2(codes + j * row_bytes, bits, pb, dpad, U + (j - d0) * dpad);
                continue;
            }
#endif
            planes_unpack_portable(codes + j * row_bytes, bits, pb, dpad, U + (j - d0) * dpad);
        }
        for (Py_ssize_t q = 0; q < nq; q += 4) {
            Py_ssize_t m = nq - q < 4 ? nq - q : 4;
            const int8_t *qs[4]; /* short groups repeat their last query; its extra results are not kept */
            for (int t = 0; t < 4; t++) qs[t] = Q8 + (q + (t < m ? t : m - 1)) * dpad;
            for (Py_ssize_t j = d0; j < d1; j++) {
                int32_t dots[4];
                const uint8_t *u = U + (j - d0) * dpad;
#ifdef HAVE_AVX2_PATH
                if (fast && m == 1)
                    dots[0] = planes_dot1_avx2(u, qs[0], dpad);
                else if (fast)
                    planes_dots4_avx2(u, qs, dpad, dots);
                else
#endif
                if (m == 1)
                    dots[0] = planes_dot1_portable(u, qs[0], dpad);
                else
                    planes_dots4_portable(u, qs, dpad, dots);
                for (Py_ssize_t t = 0; t < m; t++)
                    heap_offer(score + (q + t) * k, idx + (q + t) * k, k, (float)dots[t] * dq[q + t] + off[q + t], j,
                               scale, bias, bias ? qconst[q + t] : 0.0f);
            }
        }
    }
    (void)fast;
    (void)fused;
    (void)wide;
    heap_sort_all(score, idx, nq, k);
    free(U);
    return 0;
}

static PyObject *py_planes_topk(PyObject *self, PyObject *args) {
    Py_buffer cb, qb, db, ob, sb, bb, kb, osb, oib;
    Py_ssize_t row_bytes, pb, k, doc_start, doc_end;
    int bits, path;
    if (!PyArg_ParseTuple(args, "y*niny*y*y*y*y*y*nnniw*w*", &cb, &row_bytes, &bits, &pb, &qb, &db, &ob, &sb, &bb,
                          &kb, &k, &doc_start, &doc_end, &path, &osb, &oib))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t dpad = (pb * 8 + PLANE_CHUNK - 1) / PLANE_CHUNK * PLANE_CHUNK;
    Py_ssize_t nd = row_bytes > 0 ? cb.len / row_bytes : 0;
    Py_ssize_t nq = dpad > 0 ? qb.len / dpad : 0;
    if (bits < 1 || bits > 4 || pb <= 0 || row_bytes < bits * pb || cb.len % row_bytes || path < 0 || path > 2) {
        PyErr_SetString(PyExc_ValueError, "codes must be nd * row_bytes bytes holding 1 to 4 bit-planes of pb bytes, "
                                          "and path 0 (best), 1 (portable) or 2 (AVX2 at most)");
    } else if (qb.len % dpad || db.len != (Py_ssize_t)(nq * sizeof(float)) || ob.len != db.len) {
        PyErr_SetString(PyExc_ValueError, "queries must be nq * (pb * 8 rounded up to 32) int8, with one float32 "
                                          "step and offset per query");
    } else if (check_common(nd, nq, &sb, &bb, &kb, k, doc_start, doc_end, &osb, &oib) == 0) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = planes_scan((const unsigned char *)cb.buf, row_bytes, bits, pb, (const int8_t *)qb.buf, dpad,
                         (const float *)db.buf, (const float *)ob.buf, nq, sb.len ? (const float *)sb.buf : NULL,
                         bb.len ? (const float *)bb.buf : NULL, bb.len ? (const float *)kb.buf : NULL, k, doc_start,
                         doc_end, path, (float *)osb.buf, (int64_t *)oib.buf);
        Py_END_ALLOW_THREADS
        result = none_or_nomemory(rc);
    }
    PyBuffer_Release(&cb);
    PyBuffer_Release(&qb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&osb);
    PyBuffer_Release(&oib);
    return result;
}

static PyObject *py_simd(PyObject *self, PyObject *noargs) { return PyUnicode_FromString(use_avx2() ? "avx2" : "portable"); }

static PyObject *py_topk(PyObject *self, PyObject *args) {
    Py_buffer cb, tb, sb, bb, qb, osb, oib;
    Py_ssize_t nbytes, k, doc_start, doc_end;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*nnnnw*w*", &cb, &tb, &sb, &bb, &qb, &nbytes, &k, &doc_start, &doc_end, &osb, &oib))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t nd = nbytes > 0 ? cb.len / nbytes : 0;
    Py_ssize_t table_bytes = nbytes * 256 * (Py_ssize_t)sizeof(float);
    Py_ssize_t nq = nbytes > 0 ? tb.len / table_bytes : 0;
    if (nbytes <= 0 || cb.len % nbytes || tb.len % table_bytes) {
        PyErr_SetString(PyExc_ValueError, "codes must be nd * nbytes bytes and tables nq * nbytes * 256 float32");
    } else if (check_common(nd, nq, &sb, &bb, &qb, k, doc_start, doc_end, &osb, &oib) == 0) {
        Py_BEGIN_ALLOW_THREADS
        scan((const unsigned char *)cb.buf, (const float *)tb.buf, sb.len ? (const float *)sb.buf : NULL,
             bb.len ? (const float *)bb.buf : NULL, bb.len ? (const float *)qb.buf : NULL, nq, nbytes, k,
             doc_start, doc_end, (float *)osb.buf, (int64_t *)oib.buf);
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&cb);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&qb);
    PyBuffer_Release(&osb);
    PyBuffer_Release(&oib);
    return result;
}

static void rows_scan(const float *S, Py_ssize_t nrows, Py_ssize_t ncols, Py_ssize_t k, int64_t offset, float *score,
                      int64_t *idx) {
    heap_init(score, idx, nrows * k);
    for (Py_ssize_t r = 0; r < nrows; r++) {
        const float *row = S + r * ncols;
        float *hs = score + r * k;
        int64_t *hi = idx + r * k;
        for (Py_ssize_t j = 0; j < ncols; j++)
            if (row[j] > hs[0]) score_heap_replace_root(hs, hi, k, row[j], j);
        score_heap_sort(hs, hi, k);
        for (Py_ssize_t i = 0; i < k; i++)
            if (hi[i] != INT64_MAX) hi[i] += offset;
    }
}

static PyObject *py_rows_topk(PyObject *self, PyObject *args) {
    Py_buffer sb, osb, oib;
    Py_ssize_t ncols, k;
    long long offset;
    if (!PyArg_ParseTuple(args, "y*nnLw*w*", &sb, &ncols, &k, &offset, &osb, &oib)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t row_bytes = ncols * (Py_ssize_t)sizeof(float);
    Py_ssize_t nrows = ncols > 0 ? sb.len / row_bytes : 0;
    if (ncols <= 0 || sb.len % row_bytes || k < 1 || k > ncols) {
        PyErr_SetString(PyExc_ValueError, "scores must be nrows * ncols float32 with 1 <= k <= ncols");
    } else if (osb.len != (Py_ssize_t)(nrows * k * sizeof(float)) || oib.len != (Py_ssize_t)(nrows * k * sizeof(int64_t))) {
        PyErr_SetString(PyExc_ValueError, "output buffers must hold nrows * k float32 scores and int64 indices");
    } else {
        Py_BEGIN_ALLOW_THREADS
        rows_scan((const float *)sb.buf, nrows, ncols, k, (int64_t)offset, (float *)osb.buf, (int64_t *)oib.buf);
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&sb);
    PyBuffer_Release(&osb);
    PyBuffer_Release(&oib);
    return result;
}

/* given rows of each query: out[q, j] = the table sum of code row rows[q, j] for query q (the
   asymmetric rerank of candidates, without decoding them). 0, or -1 when a row is out of range */
static int rows_adc(const unsigned char *codes, Py_ssize_t nd, Py_ssize_t nbytes, const float *T, const int64_t *rows,
                    Py_ssize_t nq, Py_ssize_t nc, float *out) {
    for (Py_ssize_t i = 0; i < nq * nc; i++)
        if (rows[i] < 0 || rows[i] >= nd) return -1;
    for (Py_ssize_t q = 0; q < nq; q++) {
        const float *Tq = T + q * nbytes * 256;
        for (Py_ssize_t j = 0; j < nc; j++) out[q * nc + j] = adc_score(Tq, codes + rows[q * nc + j] * nbytes, nbytes);
    }
    return 0;
}

static PyObject *py_rows_adc(PyObject *self, PyObject *args) {
    Py_buffer cb, tb, rb, ob;
    Py_ssize_t nbytes;
    if (!PyArg_ParseTuple(args, "y*ny*y*w*", &cb, &nbytes, &tb, &rb, &ob)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t table_bytes = nbytes * 256 * (Py_ssize_t)sizeof(float);
    Py_ssize_t nd = nbytes > 0 ? cb.len / nbytes : 0, nq = nbytes > 0 ? tb.len / table_bytes : 0;
    Py_ssize_t nc = nq > 0 ? rb.len / (nq * (Py_ssize_t)sizeof(int64_t)) : 0;
    int bad = 0;
    if (nbytes <= 0 || cb.len % nbytes || tb.len % table_bytes || nq == 0 || rb.len != nq * nc * (Py_ssize_t)sizeof(int64_t)
        || ob.len != nq * nc * (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "codes must be nd * nbytes bytes, tables nq * nbytes * 256 float32, rows nq * nc "
                        "int64 and out nq * nc float32");
    } else {
        Py_BEGIN_ALLOW_THREADS
        bad = rows_adc((const unsigned char *)cb.buf, nd, nbytes, (const float *)tb.buf, (const int64_t *)rb.buf, nq, nc,
                       (float *)ob.buf);
        Py_END_ALLOW_THREADS
        if (bad) PyErr_SetString(PyExc_ValueError, "a row is outside the codes");
        else {
            result = Py_None;
            Py_INCREF(result);
        }
    }
    PyBuffer_Release(&cb);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&rb);
    PyBuffer_Release(&ob);
    return result;
}

static PyObject *py_dense_decode(PyObject *self, PyObject *args) {
    Py_buffer cb, lb, ob;
    Py_ssize_t row_bytes, d;
    int layout, bits;
    if (!PyArg_ParseTuple(args, "y*niiny*w*", &cb, &row_bytes, &layout, &bits, &d, &lb, &ob)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t nd = row_bytes > 0 ? cb.len / row_bytes : 0;
    if (check_dense_codes(cb.len, row_bytes, layout, bits, d) != 0) {
        /* the error is set */
    } else if (lb.len != (Py_ssize_t)(d * ((Py_ssize_t)1 << bits) * sizeof(float)) || ob.len != (Py_ssize_t)(nd * d * sizeof(float))) {
        PyErr_SetString(PyExc_ValueError, "levels must be d * 2^bits float32 and out nd * d float32");
    } else {
        Py_BEGIN_ALLOW_THREADS
        decode_rows((const unsigned char *)cb.buf, row_bytes, layout, bits, d, d, (const float *)lb.buf, 0, nd, (float *)ob.buf);
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
    PyBuffer_Release(&cb);
    PyBuffer_Release(&lb);
    PyBuffer_Release(&ob);
    return result;
}

static inline void add_row(float *restrict o, const float *restrict x, Py_ssize_t w) {
    for (Py_ssize_t t = 0; t < w; t++) o[t] += x[t];
}

/* 0, or -1 when an index is not below ksub. Sums run codebook by codebook over a block of rows,
   so one codebook (ksub * w floats) stays in cache while the block's rows gather from it. */
#define BOOK_ROWS 16
static int book_rows(const unsigned char *idx, Py_ssize_t n, Py_ssize_t m, const float *books, Py_ssize_t ksub,
                     Py_ssize_t w, int add, float *out) {
    for (Py_ssize_t i = 0; i < n * m; i++)
        if (idx[i] >= ksub) return -1;
    if (!add) {
        for (Py_ssize_t i = 0; i < n; i++)
            for (Py_ssize_t j = 0; j < m; j++)
                memcpy(out + (i * m + j) * w, books + (j * ksub + idx[i * m + j]) * w, (size_t)w * sizeof(float));
        return 0;
    }
    memset(out, 0, (size_t)(n * w) * sizeof(float));
    for (Py_ssize_t i0 = 0; i0 < n; i0 += BOOK_ROWS) {
        Py_ssize_t i1 = i0 + BOOK_ROWS < n ? i0 + BOOK_ROWS : n;
        for (Py_ssize_t j = 0; j < m; j++)
            for (Py_ssize_t i = i0; i < i1; i++) add_row(out + i * w, books + (j * ksub + idx[i * m + j]) * w, w);
    }
    return 0;
}

static PyObject *py_book_decode(PyObject *self, PyObject *args) {
    Py_buffer ib, bb, ob;
    Py_ssize_t m, ksub, w;
    int add;
    if (!PyArg_ParseTuple(args, "y*ny*nnpw*", &ib, &m, &bb, &ksub, &w, &add, &ob)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = m > 0 ? ib.len / m : 0;
    if (m <= 0 || ksub <= 0 || ksub > 256 || w <= 0 || ib.len % m) {
        PyErr_SetString(PyExc_ValueError, "idx must be n * m uint8 with 1 <= ksub <= 256 and w >= 1");
    } else if (bb.len != (Py_ssize_t)(m * ksub * w * sizeof(float)) ||
               ob.len != (Py_ssize_t)(n * (add ? w : m * w) * sizeof(float))) {
        PyErr_SetString(PyExc_ValueError, "books must be m * ksub * w float32 and out n * w (add) or n * m * w float32");
    } else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = book_rows((const unsigned char *)ib.buf, n, m, (const float *)bb.buf, ksub, w, add, (float *)ob.buf);
        Py_END_ALLOW_THREADS
        if (rc) PyErr_SetString(PyExc_ValueError, "a codeword index is not below ksub");
        else {
            result = Py_None;
            Py_INCREF(result);
        }
    }
    PyBuffer_Release(&ib);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&ob);
    return result;
}

static PyMethodDef methods[] = {
    {"topk", py_topk, METH_VARARGS, "Exact top-k over byte codes scored with lookup tables (see the module source)."},
    {"dense_topk", py_dense_topk, METH_VARARGS, "Exact top-k over per-dimension codes decoded to floats (see the module source)."},
    {"planes_topk", py_planes_topk, METH_VARARGS, "Exact top-k over bit-plane codes for 8-bit queries (see the module source)."},
    {"rows_topk", py_rows_topk, METH_VARARGS, "Top-k of each row of a float32 score matrix (see the module source)."},
    {"rows_adc", py_rows_adc, METH_VARARGS, "Table sums of given code rows per query (see the module source)."},
    {"dense_decode", py_dense_decode, METH_VARARGS, "Per-dimension codes decoded to floats (see the module source)."},
    {"book_decode", py_book_decode, METH_VARARGS, "Codeword indices decoded by codebooks (see the module source)."},
    {"simd", py_simd, METH_NOARGS, "Which path dense_topk takes on this CPU: 'avx2' or 'portable'."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_adc", "Blocked exact top-k by lookup-table scores.", -1, methods};

PyMODINIT_FUNC PyInit__adc(void) { return PyModule_Create(&module); }
