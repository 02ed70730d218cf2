/*
 * Fused threshold-and-pack for embcompress.compressors.binary, and the grid codes of
 * embcompress.compressors.rabitq.
 *
 * pack(X, thresholds, d, out) -> bool
 *   X          : bytes-like, n * d float32, C order
 *   thresholds : bytes-like, d float32 (per-dimension), or 4 bytes (one value for every dimension)
 *   out        : writable, n * ceil(d / 8) bytes
 * Bit j of a row is 1 where X[j] > thresholds[j]; bits are packed most significant first and the
 * last byte of a row is zero-padded, exactly as numpy.packbits(X > t, axis=-1). Returns False when
 * any value is NaN, +-inf or beyond +-MAX_ABS (embcompress.base.MAX_ABS; the caller then finds and
 * names the row); True otherwise.
 *
 * One pass over the input: the comparison, the packing and the finiteness test read each value
 * once (numpy needs a pass for each). On x86-64 CPUs with AVX2 (checked at run time) eight values
 * are compared at once and their sign mask reversed to MSB-first order by a table; elsewhere a
 * portable loop does the same. The GIL is released; callers split rows over threads.
 *
 * level_sums(X, thresholds, d, sums, highs, squares, counts)
 *   X          : bytes-like, n * d float32, C order
 *   thresholds : bytes-like, d float32
 *   sums, highs, squares : writable, d float64 each; counts: writable, d int64
 * Adds, per dimension j, the values X[:, j] to sums[j], those above thresholds[j] to highs[j] (and
 * one per such value to counts[j]), and their squares to squares[j]: the statistics of binary's
 * fitted decoding levels (embcompress.compressors.binary.level_sums) in one pass. Each sum runs in
 * double, row after row, as numpy adds the rows of an axis-0 sum, and a square is the product of
 * the doubles (no fused multiply-add), so the results are numpy's.
 *
 * grid_levels(U, d, bits, out, dots)
 *   U    : bytes-like, n * d float32 (RaBitQ's rotated unit residuals)
 *   out  : writable, n * d bytes: per dimension the level index v in 0 .. 2^bits - 1 of the odd
 *          integer g = 2v - (2^bits - 1) chosen for it
 *   dots : writable, n float32: <g, u>, summed in double in dimension order
 * For each row, the grid vector g (odd integers in [-(2^B - 1), 2^B - 1], the sign of u; u = 0
 * counts as negative) whose direction is closest to u: the largest <g, u> / ||g|| over every scale
 * t of g = round-to-odd(t |u|) (extended RaBitQ, Gao et al., 2024). |g_j| = 2k + 1 steps up at
 * t = 2(k + 1) / |u_j|, so one sweep over these critical points in increasing order visits every
 * distinct code; <g, |u|> and ||g||^2 are updated per step and the cosine compared after each
 * group of equal points. The first best wins and is rebuilt from the steps it took. The points
 * are ordered by a counting sort on their float32 rounding and an exact fix-up (sorted_steps),
 * about d * (2^(B-1) - 1) operations of each kind per row, without data-dependent branches in
 * the bulk of the work.
 *
 * encode(RP, norms, d, bits, out)
 *   RP    : bytes-like, n * d float32, the rotated residuals (o - c) P
 *   norms : bytes-like, n float32, ||o - c||
 *   out   : writable, n * (bits * ceil(d / 8) + 4) bytes: RaBitQ's code rows
 * u = RP / norm (as numpy divides in float32), grid_levels' code of u, its bit-planes (most
 * significant first, each packed as numpy.packbits) and the factor norm / <g, u> (float32, 0 when
 * <g, u> <= 0) in 4 little-endian bytes: the bytes embcompress.compressors.rabitq's numpy path
 * writes, in one pass per row.
 *
 * hadamard(X, mean, d, perms, signs, rounds, L, scale, out)
 *   X     : bytes-like, n * d float32, C order
 *   mean  : bytes-like, d float32, subtracted from each row first
 *   perms : bytes-like, rounds * d int64 (each a permutation of 0 .. d - 1)
 *   signs : bytes-like, rounds * 2 * L float32 (+1 or -1)
 *   out   : writable, n * d float32
 * The structured rotation of embcompress.compressors.rotate (kind "hadamard"): per round, the
 * row's values permuted (y[j] = x[perm[j]]), then its first L values and its last L values
 * (L a power of two, L <= d < 2L; the second block only when d > L) each multiplied by their
 * signs, put through an unnormalized fast Walsh-Hadamard transform and multiplied by ``scale``
 * (1 / sqrt(L) in float32). Additions, subtractions and the two products happen in the order of
 * the module's numpy path, each rounded to float32, so both write the same bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../_cext.h"
#ifdef HAVE_AVX2_PATH
#include <immintrin.h>
#endif

#define MAX_ABS 1e15f /* embcompress.base.MAX_ABS */
#define COUNT_SIZE 65537 /* RaBitQ's sort: at most 65536 buckets */
#define MAX_DIM (1 << 24) /* RaBitQ: a step's id (j << 7 | m - 1) fits 32 bits */

static unsigned char REVERSED[256]; /* REVERSED[b] = b with its 8 bits in reverse order */

static void init_reversed(void) {
    for (int b = 0; b < 256; b++) {
        int r = 0;
        for (int i = 0; i < 8; i++)
            if (b & (1 << i)) r |= 1 << (7 - i);
        REVERSED[b] = (unsigned char)r;
    }
}

/* bits [j0, d) of one row, portable; returns 0 if a value is NaN, +-inf or beyond +-MAX_ABS */
static int pack_tail(const float *x, const float *t, int scalar_t, Py_ssize_t j0, Py_ssize_t d, unsigned char *o) {
    int finite = 1;
    for (Py_ssize_t j = j0; j < d; j += 8) {
        unsigned char byte = 0;
        Py_ssize_t end = j + 8 < d ? j + 8 : d;
        for (Py_ssize_t i = j; i < end; i++) {
            float v = x[i];
            finite &= fabsf(v) <= MAX_ABS; /* false for NaN too */
            byte |= (unsigned char)((v > (scalar_t ? t[0] : t[i])) << (7 - (i - j)));
        }
        o[j / 8] = byte;
    }
    return finite;
}

static int pack_portable(const float *X, const float *t, int scalar_t, Py_ssize_t n, Py_ssize_t d, unsigned char *out) {
    Py_ssize_t nb = (d + 7) / 8;
    int finite = 1;
    for (Py_ssize_t r = 0; r < n; r++) finite &= pack_tail(X + r * d, t, scalar_t, 0, d, out + r * nb);
    return finite;
}

#ifdef HAVE_AVX2_PATH
__attribute__((target("avx2"))) static int pack_avx2(const float *X, const float *t, int scalar_t, Py_ssize_t n,
                                                     Py_ssize_t d, unsigned char *out) {
    Py_ssize_t nb = (d + 7) / 8, full = d / 8 * 8;
    const __m256 sign = _mm256_set1_ps(-0.0f), limit = _mm256_set1_ps(MAX_ABS);
    __m256 bad = _mm256_setzero_ps(); /* lanes that saw NaN, +-inf or |v| > MAX_ABS */
    int finite = 1;
    const __m256 tb = _mm256_set1_ps(t[0]);
    for (Py_ssize_t r = 0; r < n; r++) {
        const float *x = X + r * d;
        unsigned char *o = out + r * nb;
        for (Py_ssize_t j = 0; j < full; j += 8) {
            __m256 v = _mm256_loadu_ps(x + j);
            __m256 th = scalar_t ? tb : _mm256_loadu_ps(t + j);
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_andnot_ps(sign, v), limit, _CMP_NLE_UQ));
            o[j / 8] = REVERSED[_mm256_movemask_ps(_mm256_cmp_ps(v, th, _CMP_GT_OQ))];
        }
        if (full < d) finite &= pack_tail(x, t, scalar_t, full, d, o);
    }
    /* "not <= limit, or unordered" is true for NaN, +-inf and too large values */
    return finite && _mm256_movemask_ps(bad) == 0;
}
#endif


/* pack_avx2 where this CPU can run it and not told otherwise, pack_portable elsewhere */
static int pack_rows(const float *X, const float *t, int scalar_t, Py_ssize_t n, Py_ssize_t d, unsigned char *out, int portable) {
#ifdef HAVE_AVX2_PATH
    if (!portable && use_avx2()) return pack_avx2(X, t, scalar_t, n, d, out);
#endif
    return pack_portable(X, t, scalar_t, n, d, out);
}

static PyObject *py_pack(PyObject *self, PyObject *args) {
    Py_buffer xb, tb, ob;
    Py_ssize_t d;
    int portable = 0;
    if (!PyArg_ParseTuple(args, "y*y*nw*|p", &xb, &tb, &d, &ob, &portable)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t nb = (d + 7) / 8;
    Py_ssize_t n = d > 0 ? xb.len / (Py_ssize_t)(d * sizeof(float)) : 0;
    int scalar_t = tb.len == (Py_ssize_t)sizeof(float);
    if (d <= 0 || xb.len % (Py_ssize_t)(d * sizeof(float))) {
        PyErr_SetString(PyExc_ValueError, "X must hold n * d float32 values");
    } else if (!scalar_t && tb.len != (Py_ssize_t)(d * sizeof(float))) {
        PyErr_SetString(PyExc_ValueError, "thresholds must be one float32 or d float32 values");
    } else if (ob.len != n * nb) {
        PyErr_SetString(PyExc_ValueError, "out must hold n * ceil(d / 8) bytes");
    } else {
        int finite;
        Py_BEGIN_ALLOW_THREADS
        finite = pack_rows((const float *)xb.buf, (const float *)tb.buf, scalar_t, n, d, (unsigned char *)ob.buf, portable);
        Py_END_ALLOW_THREADS
        result = PyBool_FromLong(finite);
    }
    PyBuffer_Release(&xb);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&ob);
    return result;
}

/* ---- binary's decoding levels: per-dimension sums in one pass ------------------------------- */

/* one row's dimensions j0 .. d - 1 added to the statistics */
static void level_row(const float *x, const float *t, Py_ssize_t j0, Py_ssize_t d, double *sums, double *highs,
                      double *squares, int64_t *counts) {
    for (Py_ssize_t j = j0; j < d; j++) {
        double v = (double)x[j];
        sums[j] += v;
        squares[j] += v * v;
        if (x[j] > t[j]) {
            highs[j] += v;
            counts[j] += 1;
        }
    }
}

static void level_sums_portable(const float *X, const float *t, Py_ssize_t n, Py_ssize_t d, double *sums,
                                double *highs, double *squares, int64_t *counts) {
    for (Py_ssize_t r = 0; r < n; r++) level_row(X + r * d, t, 0, d, sums, highs, squares, counts);
}

#ifdef HAVE_AVX2_PATH
__attribute__((target("avx2"))) static void level_sums_avx2(const float *X, const float *t, Py_ssize_t n, Py_ssize_t d,
                                                            double *sums, double *highs, double *squares,
                                                            int64_t *counts) {
    Py_ssize_t full = d / 4 * 4;
    for (Py_ssize_t r = 0; r < n; r++) {
        const float *x = X + r * d;
        for (Py_ssize_t j = 0; j < full; j += 4) {
            __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + j));
            __m256d above = _mm256_cmp_pd(v, _mm256_cvtps_pd(_mm_loadu_ps(t + j)), _CMP_GT_OQ);
            _mm256_storeu_pd(sums + j, _mm256_add_pd(_mm256_loadu_pd(sums + j), v));
            _mm256_storeu_pd(squares + j, _mm256_add_pd(_mm256_loadu_pd(squares + j), _mm256_mul_pd(v, v)));
            _mm256_storeu_pd(highs + j, _mm256_add_pd(_mm256_loadu_pd(highs + j), _mm256_and_pd(above, v)));
            __m256i c = _mm256_loadu_si256((const __m256i *)(counts + j)); /* above is all ones: -1 */
            _mm256_storeu_si256((__m256i *)(counts + j), _mm256_sub_epi64(c, _mm256_castpd_si256(above)));
        }
        level_row(x, t, full, d, sums, highs, squares, counts);
    }
}
#endif

static PyObject *py_level_sums(PyObject *self, PyObject *args) {
    Py_buffer xb, tb, sb, hb, qb, cb;
    Py_ssize_t d;
    int portable = 0;
    if (!PyArg_ParseTuple(args, "y*y*nw*w*w*w*|p", &xb, &tb, &d, &sb, &hb, &qb, &cb, &portable)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = d > 0 ? xb.len / (Py_ssize_t)(d * sizeof(float)) : 0;
    Py_ssize_t row = d * (Py_ssize_t)sizeof(double);
    if (d <= 0 || xb.len % (Py_ssize_t)(d * sizeof(float)) || tb.len != d * (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "X must hold n * d float32 values and thresholds d float32");
    } else if (sb.len != row || hb.len != row || qb.len != row || cb.len != d * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "sums, highs and squares must hold d float64 and counts d int64");
    } else {
        const float *X = (const float *)xb.buf, *t = (const float *)tb.buf;
        double *s = (double *)sb.buf, *h = (double *)hb.buf, *q = (double *)qb.buf;
        int64_t *c = (int64_t *)cb.buf;
        Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_AVX2_PATH
        if (!portable && use_avx2()) level_sums_avx2(X, t, n, d, s, h, q, c);
        else
#endif
        level_sums_portable(X, t, n, d, s, h, q, c);
        Py_END_ALLOW_THREADS
        Py_INCREF(Py_None);
        result = Py_None;
    }
    PyBuffer_Release(&xb);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&hb);
    PyBuffer_Release(&qb);
    PyBuffer_Release(&cb);
    return result;
}

/* ---- RaBitQ's multi-bit grid: the best scale per row, exactly -------------------------------- */

/* One step of the sweep: dimension j's |g_j| goes from 2m - 1 to 2m + 1 at the scale key = m * r_j,
   r_j = 1 / |u_j| (the factor 2 of the scale left out). */
typedef struct {
    double key;
    int32_t j;
    int32_t m;
} step_t;

/* (key, j) order: lower scale first, then lower dimension -- a total order on a row's steps */
static inline int step_before(const step_t *a, const step_t *b) {
    return a->key < b->key || (a->key == b->key && a->j < b->j);
}

typedef struct { /* one thread's scratch for grid_row */
    uint32_t *bucket, *id; /* K * d each */
    int32_t *count;        /* COUNT_SIZE */
    uint32_t lo;           /* the buckets of sorted_steps: (float32 bits - lo) >> shift */
    int shift;
    double *r;
    step_t *steps;
    double *cos, *sq;
    int32_t *k;
} grid_work_t;

/* The steps in (scale, dimension) order: every (j, m) with |u_j| > 0, m = 1 .. K, generated by
   dimension and placed by a stable counting sort on the float32 rounding of their scale (its bit
   pattern above the smallest, shifted right until there are at most about two buckets a step).
   Rounding to float32 is monotone, so only steps in one bucket can be out of order; fix_up puts
   a run of whole buckets right. grid_levels_numpy orders the same products the same way.
   Returns the number of steps. */
static Py_ssize_t sorted_steps(const float *u, Py_ssize_t d, int K, grid_work_t *w) {
    Py_ssize_t n = 0;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (Py_ssize_t j = 0; j < d; j++) {
        double a = fabs((double)u[j]);
        w->r[j] = a > 0 ? 1.0 / a : 0.0;
        if (a > 0)
            for (int m = 1; m <= K; m++) {
                float kf = (float)((double)m * w->r[j]);
                uint32_t bits;
                memcpy(&bits, &kf, sizeof bits);
                lo = bits < lo ? bits : lo;
                hi = bits > hi ? bits : hi;
                w->bucket[n] = bits;
                w->id[n++] = ((uint32_t)j << 7) | (uint32_t)(m - 1); /* K <= 127 */
            }
    }
    if (n == 0) return 0;
    /* buckets: the float32 bit patterns (ordered as the values are) above lo, shifted right
       until there are at most about 2n of them (and never more than COUNT_SIZE - 1) */
    int shift = 0;
    while (((hi - lo) >> shift) + 1 > (uint32_t)(2 * n) || ((hi - lo) >> shift) + 2 > COUNT_SIZE) shift++;
    w->lo = lo;
    w->shift = shift;
    uint32_t nb = ((hi - lo) >> shift) + 1;
    int32_t *count = w->count;
    memset(count, 0, (size_t)(nb + 1) * sizeof(int32_t));
    for (Py_ssize_t i = 0; i < n; i++) count[((w->bucket[i] - lo) >> shift) + 1]++;
    for (uint32_t b = 0; b < nb; b++) count[b + 1] += count[b];
    step_t *st = w->steps;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t id = w->id[i];
        step_t x = {0.0, (int32_t)(id >> 7), (int32_t)(id & 127) + 1};
        x.key = (double)x.m * w->r[x.j];
        st[count[(w->bucket[i] - lo) >> shift]++] = x;
    }
    return n;
}

static inline uint32_t bucket_of(double key, const grid_work_t *w) {
    float kf = (float)key;
    uint32_t bits;
    memcpy(&bits, &kf, sizeof bits);
    return (bits - w->lo) >> w->shift;
}

/* insertion sort of st[c0, c1) on the exact (scale, dimension) order; c0 and c1 are bucket
   boundaries, and steps only move within their bucket */
static void fix_up(step_t *st, Py_ssize_t c0, Py_ssize_t c1) {
    for (Py_ssize_t i = c0 + 1; i < c1; i++) {
        if (!step_before(st + i, st + i - 1)) continue;
        step_t x = st[i];
        Py_ssize_t p = i;
        while (p > c0 && step_before(&x, st + p - 1)) {
            st[p] = st[p - 1];
            p--;
        }
        st[p] = x;
    }
}

/* C[i] = C[i] / sqrt(S[i]): exactly rounded, so every path gives the same values */
static void cosines_portable(double *C, const double *S, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) C[i] = C[i] / sqrt(S[i]);
}

#ifdef HAVE_AVX2_PATH
__attribute__((target("avx2"))) static void cosines_avx2(double *C, const double *S, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) C[i] = C[i] / sqrt(S[i]);
}
#endif

static void cosines(double *C, const double *S, Py_ssize_t n) {
#ifdef HAVE_AVX2_PATH
    if (use_avx2()) {
        cosines_avx2(C, S, n);
        return;
    }
#endif
    cosines_portable(C, S, n);
}

/* The sweep over the steps: each adds to <g, |u|> and ||g||^2 in step order, and the cosine is
   compared after each group of equal scales; the first best wins. Returns the number of steps
   taken by the best code (0: every |g_j| = 1).
   The steps go in chunks of whole buckets: each is put in exact order, its running sums taken (a
   dependent chain, kept apart from the cosines), its cosines computed in a loop the compiler
   vectorizes (sqrt and division are exactly rounded: the values a scalar loop gives) and its
   first best group end found. The sweep stops once no later code can win, by the bound at the
   chunk's end: <g, |u|> never exceeds D = (2K + 1) sum |u_j|, the last code's (with a margin far
   above the rounding of these sums), and later steps have larger scales (the bound is at least as
   tight as D / sqrt(||g||^2 so far) alone). */
#define SWEEP_CHUNK 256
static Py_ssize_t best_steps(const float *u, Py_ssize_t d, int K, grid_work_t *w) {
    double dot = 0.0, sq = (double)d;
    for (Py_ssize_t j = 0; j < d; j++) dot += fabs((double)u[j]);
    double best = dot / sqrt(sq);
    Py_ssize_t best_n = 0;
    if (K == 0) return 0;
    const double top_dot = (2.0 * K + 1.0) * dot * (1.0 + 1e-9);
    Py_ssize_t total = sorted_steps(u, d, K, w);
    step_t *st = w->steps;
    double *C = w->cos, *S = w->sq;
    for (Py_ssize_t c0 = 0; c0 < total;) {
        Py_ssize_t c1 = c0 + SWEEP_CHUNK < total ? c0 + SWEEP_CHUNK : total;
        while (c1 < total && bucket_of(st[c1].key, w) == bucket_of(st[c1 - 1].key, w)) c1++;
        fix_up(st, c0, c1);
        for (Py_ssize_t i = c0; i < c1; i++) {
            dot += 2.0 * fabs((double)u[st[i].j]); /* |g_j| from 2m - 1 to 2m + 1 */
            sq += 8.0 * st[i].m;
            C[i] = dot;
            /* only complete groups of equal scales count: within one, a cosine of 0 (never the
               best); the chunk's last step ends its group (the next bucket has larger scales) */
            S[i] = i + 1 < c1 && st[i + 1].key == st[i].key ? INFINITY : sq;
        }
        cosines(C + c0, S + c0, c1 - c0);
        double mx = best;
        for (Py_ssize_t i = c0; i < c1; i++) mx = C[i] > mx ? C[i] : mx;
        if (mx > best) {
            for (Py_ssize_t i = c0; i < c1; i++)
                if (C[i] == mx) {
                    best_n = i + 1;
                    break;
                }
            best = mx;
        }
        /* every later step has a scale >= kappa, the chunk's last: it adds 2|u_j| <= 2m / kappa
           to <g, |u|> and 8m to ||g||^2, so a later code's cosine is at most
           min(dot + x / (4 kappa), top_dot) / sqrt(sq + x) for some x >= 0: at most the current
           cosine (not above best) or its value where the two meet, x = 4 kappa (top_dot - dot) */
        const double kappa = st[c1 - 1].key * (1.0 - 1e-9), gap = top_dot > dot ? top_dot - dot : 0.0;
        if (top_dot * top_dot < best * best * (sq + 4.0 * kappa * gap)) break; /* no later code can beat it */
        c0 = c1;
    }
    return best_n;
}

static int grid_work_init(grid_work_t *w, Py_ssize_t d, int K) {
    Py_ssize_t total = (K > 0 ? K : 1) * d;
    w->bucket = malloc((size_t)total * sizeof(uint32_t));
    w->id = malloc((size_t)total * sizeof(uint32_t));
    w->count = malloc((size_t)COUNT_SIZE * sizeof(int32_t));
    w->r = malloc((size_t)d * sizeof(double));
    w->steps = malloc((size_t)total * sizeof(step_t));
    w->k = malloc((size_t)d * sizeof(int32_t));
    w->cos = malloc((size_t)total * sizeof(double));
    w->sq = malloc((size_t)total * sizeof(double));
    return (w->bucket && w->id && w->count && w->r && w->steps && w->k && w->cos && w->sq) ? 0 : -1;
}

static void grid_work_free(grid_work_t *w) {
    free(w->bucket); free(w->id); free(w->count); free(w->r); free(w->steps); free(w->k); free(w->cos); free(w->sq);
}

/* one row: the level index of every dimension into o, and <g, u> (double, dimension order) */
static double grid_row(const float *u, Py_ssize_t d, int K, grid_work_t *w, unsigned char *o) {
    Py_ssize_t n = best_steps(u, d, K, w);
    memset(w->k, 0, (size_t)d * sizeof(int32_t));
    for (Py_ssize_t i = 0; i < n; i++) w->k[w->steps[i].j]++; /* the steps within the best group */
    double dot = 0.0;
    for (Py_ssize_t j = 0; j < d; j++) {
        int k = w->k[j];
        int g = u[j] > 0 ? 2 * k + 1 : -(2 * k + 1);
        dot += (double)g * (double)u[j];
        o[j] = (unsigned char)((g + 2 * K + 1) / 2); /* level index 0 .. 2^B - 1 */
    }
    return dot;
}

static int grid_rows(const float *U, Py_ssize_t n, Py_ssize_t d, int bits, unsigned char *out, float *dots) {
    const int K = (1 << (bits - 1)) - 1; /* |g| = 2k + 1, k in 0 .. K */
    grid_work_t w = {0};
    if (grid_work_init(&w, d, K)) {
        grid_work_free(&w);
        return -1;
    }
    for (Py_ssize_t r = 0; r < n; r++) dots[r] = (float)grid_row(U + r * d, d, K, &w, out + r * d);
    grid_work_free(&w);
    return 0;
}

/* u = x / norm (float32, as numpy divides; a zero norm divides by 1) */
static void unit_row(const float *x, float norm, Py_ssize_t d, float *u) {
    const float nr = norm > 0 ? norm : 1.0f;
    for (Py_ssize_t j = 0; j < d; j++) u[j] = x[j] / nr;
}

/* the factor norm / <g, u> (float32; 0 where <g, u> <= 0) as 4 little-endian bytes */
static void put_factor(float norm, float dot, unsigned char *o) {
    float f = dot > 0 ? norm / dot : 0.0f;
    uint32_t fb;
    memcpy(&fb, &f, sizeof fb);
    for (int b = 0; b < 4; b++) o[b] = (unsigned char)(fb >> (8 * b));
}

/* One bit, ONE_BIT_ROWS rows at a time: g = sign(u) (0 counts as negative), the sign bits packed as
   binarization packs them (u > 0), and <g, u> = sum |u_j| (zeros included), each row's sum in
   double in dimension order: the rows' sums advance side by side, so they do not wait on one
   another's additions. U: ONE_BIT_ROWS * d floats of scratch. */
#define ONE_BIT_ROWS 8
static void encode_one_bit(const float *RP, const float *norms, Py_ssize_t n, Py_ssize_t d, unsigned char *out, float *U) {
    const Py_ssize_t width = (d + 7) / 8 + 4;
    const float zero = 0.0f;
    for (Py_ssize_t r0 = 0; r0 < n; r0 += ONE_BIT_ROWS) {
        const int rows = n - r0 < ONE_BIT_ROWS ? (int)(n - r0) : ONE_BIT_ROWS;
        double sum[ONE_BIT_ROWS] = {0};
        for (int i = 0; i < rows; i++) {
            unit_row(RP + (r0 + i) * d, norms[r0 + i], d, U + i * d);
            pack_rows(U + i * d, &zero, 1, 1, d, out + (r0 + i) * width, 0); /* u is finite: the flag is not read */
        }
        if (rows < ONE_BIT_ROWS) memset(U + rows * d, 0, (size_t)((ONE_BIT_ROWS - rows) * d) * sizeof(float));
        for (Py_ssize_t j = 0; j < d; j++)
            for (int i = 0; i < ONE_BIT_ROWS; i++) sum[i] += fabs((double)U[i * d + j]);
        for (int i = 0; i < rows; i++) put_factor(norms[r0 + i], (float)sum[i], out + (r0 + i) * width + width - 4);
    }
}

/* RaBitQ's code rows from the rotated residuals RP (n x d) and the residuals' norms: u = RP / norm
   (float32, as numpy divides; a zero norm divides by 1), the grid levels of u, their bit-planes
   (the most significant first, each packed MSB first as numpy.packbits) and the factor
   norm / <g, u> (float32; 0 where <g, u> <= 0) as 4 little-endian bytes after the planes. */
static int encode_rows(const float *RP, const float *norms, Py_ssize_t n, Py_ssize_t d, int bits, unsigned char *out) {
    const int K = (1 << (bits - 1)) - 1;
    const Py_ssize_t pb = (d + 7) / 8, width = bits * pb + 4;
    grid_work_t w = {0}; /* the sweep's scratch (over 256 KiB): not needed with one bit */
    float *u = malloc((size_t)(K == 0 ? ONE_BIT_ROWS * d : d) * sizeof(float));
    unsigned char *lv = malloc((size_t)d);
    if (!u || !lv || (K > 0 && grid_work_init(&w, d, K))) {
        free(u); free(lv);
        grid_work_free(&w);
        return -1;
    }
    if (K == 0) encode_one_bit(RP, norms, n, d, out, u);
    for (Py_ssize_t r = 0; r < n && K > 0; r++) {
        unit_row(RP + r * d, norms[r], d, u);
        unsigned char *o = out + r * width;
        float dot = (float)grid_row(u, d, K, &w, lv);
        memset(o, 0, (size_t)(bits * pb));
        for (int p = 0; p < bits; p++) { /* plane p holds bit (bits - 1 - p) of the levels */
            unsigned char *plane = o + p * pb;
            int shift = bits - 1 - p;
            for (Py_ssize_t j = 0; j < d; j++) plane[j >> 3] |= (unsigned char)(((lv[j] >> shift) & 1) << (7 - (j & 7)));
        }
        put_factor(norms[r], dot, o + bits * pb);
    }
    free(u); free(lv);
    grid_work_free(&w);
    return 0;
}

static PyObject *py_grid_levels(PyObject *self, PyObject *args) {
    Py_buffer ub, ob, db;
    Py_ssize_t d;
    int bits;
    if (!PyArg_ParseTuple(args, "y*niw*w*", &ub, &d, &bits, &ob, &db))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = d > 0 ? ub.len / (Py_ssize_t)(d * sizeof(float)) : 0;
    if (d <= 0 || d > MAX_DIM || ub.len % (Py_ssize_t)(d * sizeof(float)) || bits < 1 || bits > 8) {
        PyErr_SetString(PyExc_ValueError, "U must hold n * d float32 values and bits be 1 to 8");
    } else if (ob.len != n * d || db.len != n * (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "out must hold n * d bytes and dots n float32");
    } else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = grid_rows((const float *)ub.buf, n, d, bits, (unsigned char *)ob.buf, (float *)db.buf);
        Py_END_ALLOW_THREADS
        result = none_or_nomemory(rc);
    }
    PyBuffer_Release(&ub);
    PyBuffer_Release(&ob);
    PyBuffer_Release(&db);
    return result;
}

static PyObject *py_encode(PyObject *self, PyObject *args) {
    Py_buffer xb, nb_, ob;
    Py_ssize_t d;
    int bits;
    if (!PyArg_ParseTuple(args, "y*y*niw*", &xb, &nb_, &d, &bits, &ob))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = d > 0 ? xb.len / (Py_ssize_t)(d * sizeof(float)) : 0;
    if (d <= 0 || d > MAX_DIM || xb.len % (Py_ssize_t)(d * sizeof(float)) || bits < 1 || bits > 8) {
        PyErr_SetString(PyExc_ValueError, "RP must hold n * d float32 values and bits be 1 to 8");
    } else if (nb_.len != n * (Py_ssize_t)sizeof(float) || ob.len != n * (bits * ((d + 7) / 8) + 4)) {
        PyErr_SetString(PyExc_ValueError, "norms must hold n float32 and out n * (bits * ceil(d / 8) + 4) bytes");
    } else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = encode_rows((const float *)xb.buf, (const float *)nb_.buf, n, d, bits, (unsigned char *)ob.buf);
        Py_END_ALLOW_THREADS
        result = none_or_nomemory(rc);
    }
    PyBuffer_Release(&xb);
    PyBuffer_Release(&nb_);
    PyBuffer_Release(&ob);
    return result;
}

/* ---- the structured rotation (rotate kind "hadamard") ---------------------------------------- */

/* Eight rows at a time, transposed into x[8 j + lane] = row lane's value j: every butterfly, sign
 * and scale is then one operation on a vector of eight (GCC/Clang vector extensions: one AVX2
 * instruction, or two SSE ones), at every width h alike, and a round's permutation moves whole
 * vectors. Lanes never mix, so each value sees the same float32 operations in the same order as
 * in the numpy path. Vectors are loaded and stored with memcpy (no alignment or aliasing
 * assumptions; compilers emit one vector move). */
#if defined(__GNUC__) || defined(__clang__)
#define HROWS 8
typedef float hvec __attribute__((vector_size(HROWS * sizeof(float))));

#define HLOAD(p) ({ hvec v_; memcpy(&v_, (p), sizeof v_); v_; })
#define HSTORE(p, v) do { hvec s_ = (v); memcpy((p), &s_, sizeof s_); } while (0)

#define HADAMARD_GROUP_BODY                                                                       \
    for (Py_ssize_t g = 0; g < n; g += HROWS) {                                                   \
        Py_ssize_t rows = n - g < HROWS ? n - g : HROWS;                                          \
        if (rows < HROWS) memset(cur, 0, (size_t)d * HROWS * sizeof(float));                      \
        for (Py_ssize_t l = 0; l < rows; l++) {                                                   \
            const float *src = X + (g + l) * d;                                                   \
            for (Py_ssize_t j = 0; j < d; j++) cur[j * HROWS + l] = src[j] - mean[j];             \
        }                                                                                         \
        for (int r = 0; r < rounds; r++) {                                                        \
            const int64_t *p = perms + (Py_ssize_t)r * d;                                         \
            for (Py_ssize_t j = 0; j < d; j++) HSTORE(nxt + j * HROWS, HLOAD(cur + p[j] * HROWS)); \
            for (int k = 0; k < (d > L ? 2 : 1); k++) {                                           \
                float *x = nxt + (k ? d - L : 0) * HROWS;                                         \
                const float *sg = signs + ((Py_ssize_t)r * 2 + k) * L;                            \
                for (Py_ssize_t j = 0; j < L; j++) HSTORE(x + j * HROWS, HLOAD(x + j * HROWS) * sg[j]); \
                for (Py_ssize_t h = 1; h < L; h *= 2)                                             \
                    for (Py_ssize_t i = 0; i < L; i += 2 * h)                                     \
                        for (Py_ssize_t j = i; j < i + h; j++) {                                  \
                            hvec a = HLOAD(x + j * HROWS), b = HLOAD(x + (j + h) * HROWS);        \
                            HSTORE(x + j * HROWS, a + b);                                         \
                            HSTORE(x + (j + h) * HROWS, a - b);                                   \
                        }                                                                         \
                for (Py_ssize_t j = 0; j < L; j++) HSTORE(x + j * HROWS, HLOAD(x + j * HROWS) * scale); \
            }                                                                                     \
            float *t = cur;                                                                       \
            cur = nxt;                                                                            \
            nxt = t;                                                                              \
        }                                                                                         \
        for (Py_ssize_t l = 0; l < rows; l++) {                                                   \
            float *dst = out + (g + l) * d;                                                       \
            for (Py_ssize_t j = 0; j < d; j++) dst[j] = cur[j * HROWS + l];                       \
        }                                                                                         \
    }

static void hadamard_groups_portable(const float *X, const float *mean, Py_ssize_t n, Py_ssize_t d, const int64_t *perms,
                                     const float *signs, int rounds, Py_ssize_t L, float scale, float *out,
                                     float *cur, float *nxt) {
    HADAMARD_GROUP_BODY
}

#ifdef HAVE_AVX2_PATH
__attribute__((target("avx2"))) static void hadamard_groups_avx2(const float *X, const float *mean, Py_ssize_t n,
                                                                 Py_ssize_t d,
                                                                 const int64_t *perms, const float *signs, int rounds,
                                                                 Py_ssize_t L, float scale, float *out, float *cur,
                                                                 float *nxt) {
    HADAMARD_GROUP_BODY
}
#endif

static int hadamard_rows(const float *X, const float *mean, Py_ssize_t n, Py_ssize_t d, const int64_t *perms,
                         const float *signs,
                         int rounds, Py_ssize_t L, float scale, float *out) {
    float *buf = (float *)malloc(2 * (size_t)d * HROWS * sizeof(float));
    if (!buf) return -1;
#ifdef HAVE_AVX2_PATH
    if (use_avx2())
        hadamard_groups_avx2(X, mean, n, d, perms, signs, rounds, L, scale, out, buf, buf + d * HROWS);
    else
#endif
        hadamard_groups_portable(X, mean, n, d, perms, signs, rounds, L, scale, out, buf, buf + d * HROWS);
    free(buf);
    return 0;
}
#else /* no vector extensions (MSVC): one row at a time, the same operations in the same order */

static void hadamard_block(float *x, const float *s, Py_ssize_t L, float scale) {
    for (Py_ssize_t j = 0; j < L; j++) x[j] = x[j] * s[j];
    for (Py_ssize_t h = 1; h < L; h *= 2)
        for (Py_ssize_t i = 0; i < L; i += 2 * h)
            for (Py_ssize_t j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    for (Py_ssize_t j = 0; j < L; j++) x[j] = x[j] * scale;
}

static int hadamard_rows(const float *X, const float *mean, Py_ssize_t n, Py_ssize_t d, const int64_t *perms,
                         const float *signs, int rounds, Py_ssize_t L, float scale, float *out) {
    float *buf = (float *)malloc((size_t)d * sizeof(float));
    if (!buf) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        float *y = out + i * d;
        for (Py_ssize_t j = 0; j < d; j++) y[j] = X[i * d + j] - mean[j];
        for (int r = 0; r < rounds; r++) {
            const int64_t *p = perms + (Py_ssize_t)r * d;
            for (Py_ssize_t j = 0; j < d; j++) buf[j] = y[p[j]];
            hadamard_block(buf, signs + (Py_ssize_t)r * 2 * L, L, scale);
            if (d > L) hadamard_block(buf + d - L, signs + ((Py_ssize_t)r * 2 + 1) * L, L, scale);
            memcpy(y, buf, (size_t)d * sizeof(float));
        }
    }
    free(buf);
    return 0;
}
#endif

static PyObject *py_hadamard(PyObject *self, PyObject *args) {
    Py_buffer xb, mb, pb, sb, ob;
    Py_ssize_t d, L;
    int rounds;
    float scale;
    if (!PyArg_ParseTuple(args, "y*y*ny*y*infw*", &xb, &mb, &d, &pb, &sb, &rounds, &L, &scale, &ob))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = d > 0 ? xb.len / (Py_ssize_t)(d * sizeof(float)) : 0;
    int ok = d > 0 && L > 0 && (L & (L - 1)) == 0 && L <= d && d < 2 * L && rounds >= 0 &&
             xb.len % (Py_ssize_t)(d * sizeof(float)) == 0 && ob.len == xb.len && mb.len == d * (Py_ssize_t)sizeof(float) &&
             pb.len == (Py_ssize_t)rounds * d * (Py_ssize_t)sizeof(int64_t) &&
             sb.len == (Py_ssize_t)rounds * 2 * L * (Py_ssize_t)sizeof(float);
    if (ok) {  /* every index in range, so a bad plan cannot read outside a row */
        const int64_t *p = (const int64_t *)pb.buf;
        for (Py_ssize_t j = 0; j < (Py_ssize_t)rounds * d && ok; j++) ok = p[j] >= 0 && p[j] < d;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "hadamard: X and out must hold n * d float32, mean d float32, perms "
                                          "rounds * d int64 in [0, d), signs rounds * 2 * L float32, L a power of two "
                                          "with L <= d < 2L");
    } else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = hadamard_rows((const float *)xb.buf, (const float *)mb.buf, n, d, (const int64_t *)pb.buf, (const float *)sb.buf, rounds, L,
                           scale, (float *)ob.buf);
        Py_END_ALLOW_THREADS
        result = none_or_nomemory(rc);
    }
    PyBuffer_Release(&xb);
    PyBuffer_Release(&mb);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&ob);
    return result;
}

static PyObject *py_simd(PyObject *self, PyObject *noargs) { return PyUnicode_FromString(use_avx2() ? "avx2" : "portable"); }

static PyMethodDef methods[] = {
    {"pack", py_pack, METH_VARARGS, "Threshold float32 rows and pack the bits MSB first (see the module source)."},
    {"simd", py_simd, METH_NOARGS, "Which path pack() takes on this CPU: 'avx2' or 'portable'."},
    {"level_sums", py_level_sums, METH_VARARGS, "Add binary's per-dimension level statistics of float32 rows (see the module source)."},
    {"grid_levels", py_grid_levels, METH_VARARGS, "RaBitQ's best grid code per row, as level indices (see the module source)."},
    {"encode", py_encode, METH_VARARGS, "RaBitQ code rows (bit-planes and factor) from rotated residuals and their norms (see the module source)."},
    {"hadamard", py_hadamard, METH_VARARGS, "rotate's structured rotation of float32 rows (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pack", "Fused threshold-and-pack of float32 rows; RaBitQ grid codes.", -1, methods};

PyMODINIT_FUNC PyInit__pack(void) {
    init_reversed();
    return PyModule_Create(&module);
}
