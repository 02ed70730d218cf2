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
 * group of equal points. The first best wins and is rebuilt from its scale. The points come from
 * merging 2^(B-1) - 1 sequences over the dimensions sorted once by |u_j|: a sort of d and
 * d * (2^(B-1) - 1) steps per row.
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
#ifdef HAVE_AVX2_PATH
        if (!portable && use_avx2())
            finite = pack_avx2((const float *)xb.buf, (const float *)tb.buf, scalar_t, n, d, (unsigned char *)ob.buf);
        else
#endif
            finite = pack_portable((const float *)xb.buf, (const float *)tb.buf, scalar_t, n, d, (unsigned char *)ob.buf);
        Py_END_ALLOW_THREADS
        result = PyBool_FromLong(finite);
    }
    PyBuffer_Release(&xb);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&ob);
    return result;
}

/* ---- RaBitQ's multi-bit grid: the best scale per row, exactly -------------------------------- */

typedef struct {
    double r; /* 1 / |u_j|: the critical scales of dimension j are m * r */
    int32_t j;
} dim_t;

/* sort (|u_j|, j) by larger |u| first, then lower j: an LSD radix sort on 64-bit keys (the
   complement of the float32 bits of |u|, which order as the values do, above j), 8 bits a pass,
   skipping the passes where every key has the same digit. keys holds 2 * d entries (two buffers). */
static void sort_dims(const float *u, Py_ssize_t d, dim_t *s, Py_ssize_t *cnt_out, uint64_t *keys) {
    Py_ssize_t cnt = 0;
    for (Py_ssize_t j = 0; j < d; j++) {
        float a = fabsf(u[j]);
        if (a > 0) {
            uint32_t bits;
            memcpy(&bits, &a, sizeof bits);
            keys[cnt++] = ((uint64_t)(0xFFFFFFFFu - bits) << 32) | (uint64_t)j;
        }
    }
    uint64_t *src = keys, *dst = keys + d;
    for (int shift = 0; shift < 64; shift += 8) {
        Py_ssize_t count[257] = {0};
        for (Py_ssize_t i = 0; i < cnt; i++) count[((src[i] >> shift) & 255) + 1]++;
        int one_bucket = 0;
        for (int b = 0; b < 256; b++) one_bucket |= count[b + 1] == cnt;
        if (one_bucket) continue;
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (Py_ssize_t i = 0; i < cnt; i++) dst[count[(src[i] >> shift) & 255]++] = src[i];
        uint64_t *t = src; src = dst; dst = t;
    }
    for (Py_ssize_t i = 0; i < cnt; i++) {
        s[i].j = (int32_t)(src[i] & 0xFFFFFFFFu);
        s[i].r = 1.0 / fabs((double)u[s[i].j]);
    }
    *cnt_out = cnt;
}

/* The critical scales m * r_j, r_j = 1 / |u_j| (m = 1 .. K, the factor 2 left out), are K increasing
   sequences over the dimensions sorted by size; merging them visits the steps in (scale,
   dimension) order. grid_levels_numpy computes the same products.
   Returns the scale of the best group of steps (0: no step, every |g_j| = 1). */
static double best_scale(const float *u, Py_ssize_t d, int K, dim_t *s, uint64_t *keys, Py_ssize_t *pos, double *head) {
    double dot = 0.0, sq = (double)d;
    for (Py_ssize_t j = 0; j < d; j++) dot += fabs((double)u[j]);
    double best = dot / sqrt(sq), best_t = 0.0, t_cur = 0.0;
    Py_ssize_t cnt;
    if (K == 0) return best_t;
    sort_dims(u, d, s, &cnt, keys);
    if (cnt == 0) return best_t;
    for (int m = 1; m <= K; m++) {
        pos[m] = 0;
        head[m] = (double)m * s[0].r;
    }
    int stepped = 0;
    for (;;) {
        int mb = 1; /* the sequence whose head comes first: lowest scale, then lowest dimension */
        double hb = head[1];
        for (int m = 2; m <= K; m++) {
            double h = head[m];
            if (h < hb || (h == hb && h != INFINITY && s[pos[m]].j < s[pos[mb]].j)) {
                mb = m;
                hb = h;
            }
        }
        if (hb != t_cur) { /* the group at t_cur is complete: compare its code */
            if (stepped) {
                double c = dot / sqrt(sq);
                if (c > best) {
                    best = c;
                    best_t = t_cur;
                }
            }
            if (hb == INFINITY) break; /* every sequence is exhausted */
            t_cur = hb;
        }
        dot += 2.0 * fabs((double)u[s[pos[mb]].j]); /* |g_j| from 2m - 1 to 2m + 1 */
        sq += 8.0 * mb;
        stepped = 1;
        head[mb] = ++pos[mb] < cnt ? (double)mb * s[pos[mb]].r : INFINITY;
    }
    return best_t;
}

static int grid_rows(const float *U, Py_ssize_t n, Py_ssize_t d, int bits, unsigned char *out, float *dots) {
    const int K = (1 << (bits - 1)) - 1; /* |g| = 2k + 1, k in 0 .. K */
    dim_t *s = malloc((size_t)d * sizeof(dim_t));
    uint64_t *keys = malloc((size_t)(2 * d) * sizeof(uint64_t));
    Py_ssize_t *pos = malloc((size_t)(K + 1) * sizeof(Py_ssize_t));
    double *head = malloc((size_t)(K + 1) * sizeof(double));
    if (!s || !keys || !pos || !head) {
        free(s); free(keys); free(pos); free(head);
        return -1;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        const float *u = U + r * d;
        double t = K > 0 ? best_scale(u, d, K, s, keys, pos, head) : 0.0;
        unsigned char *o = out + r * d;
        double dot = 0.0;
        for (Py_ssize_t j = 0; j < d; j++) {
            double a = fabs((double)u[j]), r = 1.0 / a;
            int k = 0; /* the steps of dimension j within the best group: m * r <= t, computed as above */
            if (t > 0 && a > 0)
                while (k < K && (double)(k + 1) * r <= t) k++;
            int g = u[j] > 0 ? 2 * k + 1 : -(2 * k + 1);
            dot += (double)g * (double)u[j];
            o[j] = (unsigned char)((g + 2 * K + 1) / 2); /* level index 0 .. 2^B - 1 */
        }
        dots[r] = (float)dot;
    }
    free(s); free(keys); free(pos); free(head);
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
    if (d <= 0 || d > INT32_MAX || ub.len % (Py_ssize_t)(d * sizeof(float)) || bits < 1 || bits > 8) {
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

static PyObject *py_simd(PyObject *self, PyObject *noargs) { return PyUnicode_FromString(use_avx2() ? "avx2" : "portable"); }

static PyMethodDef methods[] = {
    {"pack", py_pack, METH_VARARGS, "Threshold float32 rows and pack the bits MSB first (see the module source)."},
    {"simd", py_simd, METH_NOARGS, "Which path pack() takes on this CPU: 'avx2' or 'portable'."},
    {"grid_levels", py_grid_levels, METH_VARARGS, "RaBitQ's best grid code per row, as level indices (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pack", "Fused threshold-and-pack of float32 rows; RaBitQ grid codes.", -1, methods};

PyMODINIT_FUNC PyInit__pack(void) {
    init_reversed();
    return PyModule_Create(&module);
}
