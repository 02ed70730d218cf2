/*
 * Positioned reads of chosen rows of a file, for the rescoring copy on disk
 * (embcompress.serving.tiers.DiskCopy).
 *
 * read_rows(fd, rows, row_bytes, base, out) -> short
 *   rows: int64 row numbers, sorted and unique; out: a writable buffer of len(rows) * row_bytes
 *   bytes. Row r starts at byte base + r * row_bytes of the file. Each run of consecutive rows is
 *   read with pread calls (repeated until complete, EINTR retried) straight into out, in order.
 *   Returns -1 when every row was read, or the first row of the run that met the end of the file
 *   (the caller reports the file as changed or truncated). Raises OSError on a failed read and
 *   ValueError on buffers of the wrong size. Cold runs are overlapped as in cosines (below): a run not
 *   all in the page cache is asked for (POSIX_FADV_WILLNEED) and read after the others. The GIL is
 *   released while it reads.
 *
 * cosines(fd, rows, row_bytes, base, kind, q, a, b, out) -> short
 *   The rescoring itself, fused with the reads: the cosine of the unit query q (float32, d values)
 *   with each row, into out (float32, one per row), without the rows ever being held as float32
 *   vectors. kind is 'f' (float32 rows), 'h' (float16) or 'b' (int8, decoded as x = a * c + b per
 *   dimension; a and b float32, d values each; empty for the other kinds). Rows are sorted and
 *   unique; each run of neighbours (up to CHUNK_BYTES) is read into a scratch buffer and scored
 *   while it is in cache. A run first is asked for from the page cache only (preadv2 RWF_NOWAIT);
 *   where it is not all there, the kernel is asked to start reading it (POSIX_FADV_WILLNEED) and it
 *   is read and scored in a second pass, so a cold query's reads are in flight together. A row
 *   whose norm is 0 scores 0. Returns as read_rows does. The GIL is released while it works.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "../_cext.h"
#include <errno.h>
#include <stdint.h>
#include <sys/types.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES (1 << 16) /* rows read at a time into the scratch buffer: 64 KiB, held in L2 while scored */
#define LANES 8               /* partial sums per row: independent chains the compiler keeps in vector registers */

/* pread until `want` bytes are in, EINTR retried: 0, the errno of a failed read, or -1 at the end of the file */
static int read_full(int fd, char *dst, size_t want, off_t at) {
    size_t done = 0;
    while (done < want) {
        ssize_t got = pread(fd, dst + done, want - done, at + (off_t)done);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (got == 0)
            return -1;
        done += (size_t)got;
    }
    return 0;
}

/* float16 -> float32 for every bit pattern, filled once when the module loads */
static float half_table[1 << 16];

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f)
        bits = sign | 0x7f800000u | (man << 13); /* inf, nan */
    else if (exp != 0)
        bits = sign | ((exp + 112) << 23) | (man << 13); /* normal: rebias 15 -> 127 */
    else if (man == 0)
        bits = sign; /* zero */
    else {            /* subnormal: exactly man * 2^-24 */
        float v = ldexpf((float)man, -24);
        memcpy(&bits, &v, 4);
        bits |= sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* the cosine of the unit query with one row whose values j .. j + 7 are LOAD(j) (a vector of eight floats):
   eight partial sums of the dot product and of the squared norm, in vector registers, summed at the end */
typedef float v8f __attribute__((vector_size(32)));
typedef int8_t v8b __attribute__((vector_size(8)));
typedef int32_t v8i __attribute__((vector_size(32)));
#define ROW_COSINE(NAME, LOAD, VALUE, ATTR)                                                                  \
    ATTR static float NAME(const char *row, const float *q, const float *a, const float *b, Py_ssize_t d) { \
        v8f dot = {0}, nn = {0}, qv, x;                                                                \
        Py_ssize_t j = 0, full = d - d % LANES;                                                        \
        for (; j < full; j += LANES) {                                                                 \
            memcpy(&qv, q + j, sizeof qv);                                                             \
            x = LOAD(j);                                                                               \
            dot += qv * x;                                                                             \
            nn += x * x;                                                                               \
        }                                                                                              \
        float D = 0, N = 0;                                                                            \
        for (int l = 0; l < LANES; l++) {                                                              \
            D += dot[l];                                                                               \
            N += nn[l];                                                                                \
        }                                                                                              \
        for (; j < d; j++) { /* the last d % 8 values */                                               \
            float v = VALUE(j);                                                                        \
            D += q[j] * v;                                                                             \
            N += v * v;                                                                                \
        }                                                                                              \
        (void)a;                                                                                       \
        (void)b;                                                                                       \
        return N > 0 ? D / sqrtf(N) : 0.0f;                                                            \
    }
/* the loads, as macros so that each is compiled inside the function it serves (the AVX2 one included) */
#define F32_LOAD(j) ({ v8f x_; memcpy(&x_, (const float *)row + (j), sizeof x_); x_; })
#define F16_LOAD(j) ({ const uint16_t *h_ = (const uint16_t *)row + (j); \
    (v8f){half_table[h_[0]], half_table[h_[1]], half_table[h_[2]], half_table[h_[3]], \
          half_table[h_[4]], half_table[h_[5]], half_table[h_[6]], half_table[h_[7]]}; })
#define I8_LOAD(j) ({ v8b c_; v8f a_, b_; memcpy(&c_, row + (j), sizeof c_); memcpy(&a_, a + (j), sizeof a_); \
    memcpy(&b_, b + (j), sizeof b_); a_ * __builtin_convertvector(__builtin_convertvector(c_, v8i), v8f) + b_; })
#define F32_VALUE(j) (((const float *)row)[j])
#define F16_VALUE(j) (half_table[((const uint16_t *)row)[j]])
#define I8_VALUE(j) (a[j] * (float)((const int8_t *)row)[j] + b[j])
#define PORTABLE
ROW_COSINE(cosine_f32, F32_LOAD, F32_VALUE, PORTABLE)
ROW_COSINE(cosine_f16, F16_LOAD, F16_VALUE, PORTABLE)
ROW_COSINE(cosine_i8, I8_LOAD, I8_VALUE, PORTABLE)
#ifdef HAVE_AVX2_PATH /* the same loops compiled for AVX2 (chosen at run time): the same sums, twice as wide */
#define AVX2 __attribute__((target("avx2")))
ROW_COSINE(cosine_f32_avx2, F32_LOAD, F32_VALUE, AVX2)
ROW_COSINE(cosine_f16_avx2, F16_LOAD, F16_VALUE, AVX2)
#include <immintrin.h>
/* GCC turns the int8 -> float conversion of eight lanes into scalar code; written out, it is two instructions */
#define I8_LOAD_AVX2(j) ({ __m256 x_ = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(a + (j)), \
    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(row + (j)))))), _mm256_loadu_ps(b + (j))); \
    v8f v_; memcpy(&v_, &x_, sizeof v_); v_; })
ROW_COSINE(cosine_i8_avx2, I8_LOAD_AVX2, I8_VALUE, AVX2)
#endif

typedef float (*row_scorer)(const char *, const float *, const float *, const float *, Py_ssize_t);

/* what one call of cosines() scores, or of read_rows() reads (score NULL: each run read straight into dest) */
typedef struct {
    int fd;
    const int64_t *rows;
    Py_ssize_t n, row_bytes, per_chunk, d;
    long long base;
    row_scorer score;
    const float *q, *a, *b;
    char *scratch;
    float *out;
    char *dest;
} row_job;

#ifdef RWF_NOWAIT
static int nowait_works = 1; /* cleared once a kernel or file system refuses RWF_NOWAIT: plain reads from then on */
#else
static int nowait_works = 0;
#endif

/* where row rows[i] starts in the file */
static inline off_t row_at(const row_job *job, Py_ssize_t i) {
    return (off_t)(job->base + (long long)job->rows[i] * (long long)job->row_bytes);
}

/* rows_core's result for a run starting at i that score_run ended with rc (0 read, -1 end of file, errno) */
static inline long long run_result(const row_job *job, Py_ssize_t i, int rc) {
    return rc < 0 ? job->rows[i] : rc > 0 ? -2 - (long long)rc : -1;
}

/* Read rows i .. j - 1 (one run of neighbours) into scratch and score them, or into their place in dest: 0, -1
   where the file ended, or the errno of a failed read. With nowait, only from the page cache: EAGAIN where any
   of the run is not there. */
static int score_run(const row_job *job, Py_ssize_t i, Py_ssize_t j, int nowait) {
    size_t want = (size_t)(j - i) * (size_t)job->row_bytes;
    off_t at = row_at(job, i);
    char *dst = job->dest != NULL ? job->dest + i * job->row_bytes : job->scratch;
    int rc = -2;
#ifdef RWF_NOWAIT
    if (nowait) {
        struct iovec iov = {dst, want};
        ssize_t got;
        do
            got = preadv2(job->fd, &iov, 1, at, RWF_NOWAIT);
        while (got < 0 && errno == EINTR);
        if (got == (ssize_t)want)
            rc = 0;
        else if (got >= 0 || errno == EAGAIN)
            return EAGAIN; /* not all in memory (or the file ended: the plain read that follows says which) */
        else if (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)
            nowait_works = 0;
        else
            return errno;
    }
#endif
    if (rc == -2)
        rc = read_full(job->fd, dst, want, at);
    if (rc != 0 || job->score == NULL)
        return rc;
    for (Py_ssize_t r = i; r < j; r++)
        job->out[r] = job->score(job->scratch + (r - i) * job->row_bytes, job->q, job->a, job->b, job->d);
    return 0;
}

/* Score (or read) every row, in runs of neighbours up to per_chunk rows. A run not in the page cache is not
   waited for: the kernel is asked to start reading it (POSIX_FADV_WILLNEED) and it is scored after the others,
   so a cold query's reads are in flight together instead of one after another. Returns -1, the first row of a run the
   file ended in, or -2 - errno of a failed read. */
static long long rows_core(const row_job *job) {
    Py_ssize_t *later = NULL, nlater = 0; /* (first, end) of the runs left for the second pass */
    long long result = -1;
    for (Py_ssize_t i = 0, j; i < job->n && result == -1; i = j) {
        for (j = i + 1; j < job->n && j - i < job->per_chunk && job->rows[j] == job->rows[j - 1] + 1; j++)
            ;
        int rc = score_run(job, i, j, nowait_works);
        if (rc == EAGAIN && later == NULL)
            later = malloc(sizeof(Py_ssize_t) * 2 * (size_t)job->n);
        if (rc == EAGAIN && later != NULL) {
            posix_fadvise(job->fd, row_at(job, i), (off_t)((j - i) * job->row_bytes), POSIX_FADV_WILLNEED);
            later[2 * nlater] = i;
            later[2 * nlater++ + 1] = j;
            continue;
        }
        if (rc == EAGAIN) /* no memory to defer it: read it now */
            rc = score_run(job, i, j, 0);
        result = run_result(job, i, rc);
    }
    for (Py_ssize_t m = 0; m < nlater && result == -1; m++)
        result = run_result(job, later[2 * m], score_run(job, later[2 * m], later[2 * m + 1], 0));
    free(later);
    return result;
}

static PyObject *cosines(PyObject *self, PyObject *args) {
    int fd, kind;
    Py_buffer rows_buf, q_buf, a_buf, b_buf, out_buf;
    Py_ssize_t row_bytes;
    long long base;
    if (!PyArg_ParseTuple(args, "iy*nLCy*y*y*w*", &fd, &rows_buf, &row_bytes, &base, &kind, &q_buf, &a_buf, &b_buf,
                          &out_buf))
        return NULL;
    Py_ssize_t n = rows_buf.len / (Py_ssize_t)sizeof(int64_t), d = q_buf.len / (Py_ssize_t)sizeof(float);
    Py_ssize_t width = kind == 'f' ? 4 : kind == 'h' ? 2 : kind == 'b' ? 1 : 0;
    int affine_ok = kind == 'b' ? (a_buf.len == q_buf.len && b_buf.len == q_buf.len) : (a_buf.len == 0 && b_buf.len == 0);
    const char *bad = NULL;
    if (width == 0)
        bad = "cosines: kind must be 'f' (float32), 'h' (float16) or 'b' (int8)";
    else if (rows_buf.len % (Py_ssize_t)sizeof(int64_t) != 0 || q_buf.len % (Py_ssize_t)sizeof(float) != 0 || d == 0 ||
             row_bytes != d * width || out_buf.len != n * (Py_ssize_t)sizeof(float) || !affine_ok)
        bad = "cosines: rows int64, q float32 of row_bytes / width values, a and b float32 of as many (int8) or "
              "empty, out float32 of len(rows)";
    char *scratch = NULL;
    Py_ssize_t per_chunk = row_bytes >= CHUNK_BYTES ? 1 : CHUNK_BYTES / row_bytes;
    if (bad == NULL && (scratch = malloc((size_t)(per_chunk * row_bytes))) == NULL)
        bad = "";
    long long rc = -1;
    if (bad == NULL) {
        Py_BEGIN_ALLOW_THREADS
        row_scorer score = kind == 'f' ? cosine_f32 : kind == 'h' ? cosine_f16 : cosine_i8;
#ifdef HAVE_AVX2_PATH
        if (use_avx2())
            score = kind == 'f' ? cosine_f32_avx2 : kind == 'h' ? cosine_f16_avx2 : cosine_i8_avx2;
#endif
        row_job job = {.fd = fd, .rows = (const int64_t *)rows_buf.buf, .n = n, .row_bytes = row_bytes,
                       .per_chunk = per_chunk, .d = d, .base = base, .score = score,
                       .q = (const float *)q_buf.buf, .a = (const float *)a_buf.buf, .b = (const float *)b_buf.buf,
                       .scratch = scratch, .out = (float *)out_buf.buf};
        rc = rows_core(&job);
        Py_END_ALLOW_THREADS
    }
    free(scratch);
    PyBuffer_Release(&rows_buf);
    PyBuffer_Release(&q_buf);
    PyBuffer_Release(&a_buf);
    PyBuffer_Release(&b_buf);
    PyBuffer_Release(&out_buf);
    if (bad != NULL) {
        if (*bad == '\0')
            return PyErr_NoMemory();
        PyErr_SetString(PyExc_ValueError, bad);
        return NULL;
    }
    if (rc <= -2) {
        errno = (int)(-2 - rc);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLongLong(rc);
}

static PyObject *read_rows(PyObject *self, PyObject *args) {
    int fd;
    Py_buffer rows_buf, out_buf;
    Py_ssize_t row_bytes;
    long long base;
    if (!PyArg_ParseTuple(args, "iy*nLw*", &fd, &rows_buf, &row_bytes, &base, &out_buf))
        return NULL;
    Py_ssize_t n = rows_buf.len / (Py_ssize_t)sizeof(int64_t);
    if (rows_buf.len % (Py_ssize_t)sizeof(int64_t) != 0 || row_bytes <= 0 || out_buf.len != n * row_bytes) {
        PyBuffer_Release(&rows_buf);
        PyBuffer_Release(&out_buf);
        PyErr_SetString(PyExc_ValueError, "read_rows: rows must be int64 and out exactly len(rows) * row_bytes bytes");
        return NULL;
    }
    long long rc;
    Py_BEGIN_ALLOW_THREADS
    /* no scoring: each run (of any length) read straight into its place in out */
    row_job job = {.fd = fd, .rows = (const int64_t *)rows_buf.buf, .n = n, .row_bytes = row_bytes,
                   .per_chunk = n > 0 ? n : 1, .base = base, .dest = (char *)out_buf.buf};
    rc = rows_core(&job);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&rows_buf);
    PyBuffer_Release(&out_buf);
    if (rc <= -2) {
        errno = (int)(-2 - rc);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLongLong(rc);
}

static PyMethodDef methods[] = {
    {"read_rows", read_rows, METH_VARARGS, "Read sorted rows of a file by positioned reads, one per run."},
    {"cosines", cosines, METH_VARARGS, "Read sorted rows of a file and score each against a unit query (cosine)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pread", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pread(void) {
    for (uint32_t h = 0; h < (1u << 16); h++)
        half_table[h] = half_to_float((uint16_t)h);
    return PyModule_Create(&module);
}
