/*
 * Fused threshold-and-pack for embcompress.compressors.binary.
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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../_simd.h"
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

static PyObject *py_simd(PyObject *self, PyObject *noargs) { return PyUnicode_FromString(use_avx2() ? "avx2" : "portable"); }

static PyMethodDef methods[] = {
    {"pack", py_pack, METH_VARARGS, "Threshold float32 rows and pack the bits MSB first (see the module source)."},
    {"simd", py_simd, METH_NOARGS, "Which path pack() takes on this CPU: 'avx2' or 'portable'."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pack", "Fused threshold-and-pack of float32 rows.", -1, methods};

PyMODINIT_FUNC PyInit__pack(void) {
    init_reversed();
    return PyModule_Create(&module);
}
