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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#define DBLOCK_BYTES (128 * 1024)

/* min-heap on (score, -idx): the root is the worst kept candidate */
static inline int worse(float sa, int64_t ia, float sb, int64_t ib) {
    return sa < sb || (sa == sb && ia > ib);
}

static void sift_down(float *hs, int64_t *hi, Py_ssize_t k, Py_ssize_t pos) {
    for (;;) {
        Py_ssize_t l = 2 * pos + 1, r = l + 1, m = pos;
        if (l < k && worse(hs[l], hi[l], hs[m], hi[m])) m = l;
        if (r < k && worse(hs[r], hi[r], hs[m], hi[m])) m = r;
        if (m == pos) return;
        float ts = hs[pos]; hs[pos] = hs[m]; hs[m] = ts;
        int64_t ti = hi[pos]; hi[pos] = hi[m]; hi[m] = ti;
        pos = m;
    }
}

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

static void scan(const unsigned char *D, const float *T, const float *scale, const float *bias, const float *qconst,
                 Py_ssize_t nq, Py_ssize_t nbytes,
                 Py_ssize_t k, Py_ssize_t doc_start, Py_ssize_t doc_end, float *score, int64_t *idx) {
    for (Py_ssize_t i = 0; i < nq * k; i++) {
        score[i] = -INFINITY;
        idx[i] = INT64_MAX;
    }
    Py_ssize_t dblock = DBLOCK_BYTES / nbytes;
    if (dblock < 64) dblock = 64;
    for (Py_ssize_t d0 = doc_start; d0 < doc_end; d0 += dblock) {
        Py_ssize_t d1 = d0 + dblock < doc_end ? d0 + dblock : doc_end;
        for (Py_ssize_t q = 0; q < nq; q++) {
            const float *Tq = T + q * nbytes * 256;
            float *hs = score + q * k;
            int64_t *hi = idx + q * k;
            float worst = hs[0];
            float qc = bias ? qconst[q] : 0.0f;
            for (Py_ssize_t j = d0; j < d1; j++) {
                float s = adc_score(Tq, D + j * nbytes, nbytes);
                if (scale) s *= scale[j];
                if (bias) s += bias[j] * qc;
                if (s > worst) {
                    hs[0] = s;
                    hi[0] = j;
                    sift_down(hs, hi, k, 0);
                    worst = hs[0];
                }
            }
        }
    }
    /* heap -> descending (score, ascending idx): repeatedly move the root (worst) to the end */
    for (Py_ssize_t q = 0; q < nq; q++) {
        float *hs = score + q * k;
        int64_t *hi = idx + q * k;
        for (Py_ssize_t end = k - 1; end > 0; end--) {
            float ts = hs[0]; hs[0] = hs[end]; hs[end] = ts;
            int64_t ti = hi[0]; hi[0] = hi[end]; hi[end] = ti;
            sift_down(hs, hi, end, 0);
        }
    }
}

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
    } else if ((sb.len != 0 && sb.len != (Py_ssize_t)(nd * sizeof(float))) || (bb.len != 0 && bb.len != (Py_ssize_t)(nd * sizeof(float)))) {
        PyErr_SetString(PyExc_ValueError, "scale and bias must hold one float32 per document, or nothing");
    } else if (bb.len != 0 && qb.len != (Py_ssize_t)(nq * sizeof(float))) {
        PyErr_SetString(PyExc_ValueError, "qconst must hold one float32 per query when bias is given");
    } else if (k < 1 || doc_start < 0 || doc_end > nd || doc_end - doc_start < k) {
        PyErr_SetString(PyExc_ValueError, "need 1 <= k <= doc_end - doc_start and a document range inside codes");
    } else if (osb.len != (Py_ssize_t)(nq * k * sizeof(float)) || oib.len != (Py_ssize_t)(nq * k * sizeof(int64_t))) {
        PyErr_SetString(PyExc_ValueError, "output buffers must hold nq * k float32 scores and int64 indices");
    } else {
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

static PyMethodDef methods[] = {
    {"topk", py_topk, METH_VARARGS, "Exact top-k over byte codes scored with lookup tables (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_adc", "Blocked exact top-k by lookup-table scores.", -1, methods};

PyMODINIT_FUNC PyInit__adc(void) { return PyModule_Create(&module); }
