/*
 * Positioned reads of chosen rows of a file, for the rescoring copy on disk
 * (embcompress.serving.copies.DiskCopy).
 *
 * read_rows(fd, rows, row_bytes, base, out[, map]) -> (short, cold)
 *   rows: int64 row numbers, sorted and unique; out: a writable buffer of len(rows) * row_bytes
 *   bytes. Row r starts at byte base + r * row_bytes of the file. Each run of consecutive rows is
 *   read with pread calls (repeated until complete, EINTR retried) straight into out, in order.
 *   Cold runs are overlapped as in cosines (below): a run not all in the page cache is asked for
 *   (POSIX_FADV_WILLNEED) and read after the others.
 *
 * cosines(fd, rows, row_bytes, base, kind, q, a, b, out[, map[, hat]]) -> (short, cold)
 *   The rescoring itself, fused with the reads: the cosine of the unit query q (float32, d values)
 *   with each row, into out (float32, one per row), without the rows ever being held as float32
 *   vectors. kind is 'f' (float32 rows), 'h' (float16) or 'b' (int8, decoded as x = a * c + b per
 *   dimension; a and b float32, d values each; empty for the other kinds), or 'r': an int8 residual
 *   row (serving.residual: d int8 values c, then its scale s and norm m as float32, row_bytes = d + 8)
 *   scored as (hat + s * <q, c>) / m, where hat (float32, one per row, in the order of rows) is the
 *   query's inner product with the row's reconstruction by the first stage. Rows are sorted and
 *   unique; each run of neighbours (up to CHUNK_BYTES) is read into a scratch buffer and scored
 *   while it is in cache. A run first is asked for from the page cache only (preadv2 RWF_NOWAIT);
 *   where it is not all there, the kernel is asked to start reading it (POSIX_FADV_WILLNEED) and it
 *   is read and scored in a second pass, so a cold query's reads are in flight together. A row
 *   whose norm is 0 scores 0.
 *
 * Both take an optional map: the whole file memory-mapped (a read-only buffer; None for none). Rows
 * are then scored or copied from it with no system call each, which is most of what a warm read
 * costs. Every PROBE_ROWS rows that took longer than PROBE_NS, the thread's major page faults are
 * counted; once one is seen (the map waiting for the device, a page at a time), the rest of the rows
 * are read by the two passes above instead. Rows the map does not reach are read, not mapped.
 *
 * Both return (short, cold): short is -1 when every row was read, or the first row of the run that
 * met the end of the file (the caller reports the file as changed or truncated); cold is whether any
 * row had to be read from the device (a run deferred, or a fault waited for). They raise OSError on a
 * failed read and ValueError on buffers of the wrong size. The GIL is released while they work.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "../_cext.h"
#include <errno.h>
#include <stdint.h>
#include <sys/types.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES (1 << 16) /* rows read at a time into the scratch buffer: 64 KiB, held in L2 while scored */
#define LANES 8               /* partial sums per row: independent chains the compiler keeps in vector registers */
#define AHEAD 8               /* rows read from the map ahead of the one scored (prefetched) */
#define PROBE_ROWS 16         /* rows scored from the map between looks at the clock */
#define PROBE_NS 50000        /* 16 rows in memory take 1-2 µs (tens with minor faults); one read from disk, more */

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
/* <q, c> of a row of plain int8 values c (an int8 residual row's: its scale and norm are the caller's) */
#define ROW_DOT(NAME, LOAD, ATTR)                                                                           \
    ATTR static float NAME(const char *row, const float *q, const float *a, const float *b, Py_ssize_t d) { \
        v8f dot = {0}, qv;                                                                             \
        Py_ssize_t j = 0, full = d - d % LANES;                                                        \
        for (; j < full; j += LANES) {                                                                 \
            memcpy(&qv, q + j, sizeof qv);                                                             \
            dot += qv * LOAD(j);                                                                       \
        }                                                                                              \
        float D = 0;                                                                                   \
        for (int l = 0; l < LANES; l++)                                                                \
            D += dot[l];                                                                               \
        for (; j < d; j++)                                                                             \
            D += q[j] * (float)((const int8_t *)row)[j];                                               \
        (void)a;                                                                                       \
        (void)b;                                                                                       \
        return D;                                                                                      \
    }
#define C8_LOAD(j) ({ v8b c_; memcpy(&c_, row + (j), sizeof c_); \
    __builtin_convertvector(__builtin_convertvector(c_, v8i), v8f); })
ROW_DOT(dot_c8, C8_LOAD, PORTABLE)
#ifdef HAVE_AVX2_PATH /* the same loops compiled for AVX2 (chosen at run time): the same sums, twice as wide */
#define AVX2 __attribute__((target("avx2")))
ROW_COSINE(cosine_f32_avx2, F32_LOAD, F32_VALUE, AVX2)
ROW_COSINE(cosine_f16_avx2, F16_LOAD, F16_VALUE, AVX2)
#include <immintrin.h>
/* GCC turns the int8 -> float conversion of eight lanes into scalar code; written out, it is two instructions */
#define C8_AVX2(j) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(row + (j)))))
#define I8_LOAD_AVX2(j) ({ __m256 x_ = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(a + (j)), C8_AVX2(j)), \
    _mm256_loadu_ps(b + (j))); v8f v_; memcpy(&v_, &x_, sizeof v_); v_; })
#define C8_LOAD_AVX2(j) ({ __m256 x_ = C8_AVX2(j); v8f v_; memcpy(&v_, &x_, sizeof v_); v_; })
ROW_COSINE(cosine_i8_avx2, I8_LOAD_AVX2, I8_VALUE, AVX2)
ROW_DOT(dot_c8_avx2, C8_LOAD_AVX2, AVX2)
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
    const float *hat; /* kind 'r': each row's inner product with its reconstruction (NULL for the other kinds) */
    char *scratch;
    float *out;
    char *dest;
    const char *map; /* the file memory-mapped, holding every row asked for (NULL: positioned reads only) */
    int cold;        /* set where a row had to come from the device */
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

/* the score of row r, whose bytes are at src: its cosine, or for an int8 residual (hat + s * <q, c>) / m */
static inline float score_row(const row_job *job, const char *src, Py_ssize_t r) {
    float v = job->score(src, job->q, job->a, job->b, job->d);
    if (job->hat == NULL)
        return v;
    float tail[2]; /* the row's scale and norm, after its d values */
    memcpy(tail, src + job->d, sizeof tail);
    return tail[1] > 0 ? (job->hat[r] + tail[0] * v) / tail[1] : 0.0f;
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
        job->out[r] = score_row(job, job->scratch + (r - i) * job->row_bytes, r);
    return 0;
}

/* Score (or read) every row, in runs of neighbours up to per_chunk rows. A run not in the page cache is not
   waited for: the kernel is asked to start reading it (POSIX_FADV_WILLNEED) and it is scored after the others,
   so a cold query's reads are in flight together instead of one after another. Returns -1, the first row of a run the
   file ended in, or -2 - errno of a failed read. */
static long long rows_core(row_job *job) {
    Py_ssize_t *later = NULL, nlater = 0; /* (first, end) of the runs left for the second pass */
    long long result = -1;
    for (Py_ssize_t i = 0, j; i < job->n && result == -1; i = j) {
        for (j = i + 1; j < job->n && j - i < job->per_chunk && job->rows[j] == job->rows[j - 1] + 1; j++)
            ;
        int rc = score_run(job, i, j, nowait_works);
        if (rc == EAGAIN)
            job->cold = 1;
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

static long long clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* this thread's major page faults so far (the process's, where a thread's own are not counted) */
static long major_faults(void) {
    struct rusage u;
#ifdef RUSAGE_THREAD
    if (getrusage(RUSAGE_THREAD, &u) == 0)
        return u.ru_majflt;
#endif
    return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_majflt : 0;
}

/* Score (or copy) the rows from the map, in order: how many were done. All of them, unless a slow group of
   PROBE_ROWS had waited for pages from the device: the caller reads the rest with rows_core's two passes. */
static Py_ssize_t map_rows(const row_job *job) {
    long faults = major_faults();
    long long start = clock_ns();
    for (Py_ssize_t r = 0; r < job->n; r++) {
        const char *src = job->map + row_at(job, r);
        if (r + AHEAD < job->n) { /* a row AHEAD on asked for now: its cache misses overlap this row's work */
            const char *next = job->map + row_at(job, r + AHEAD);
            for (Py_ssize_t at = 0; at < job->row_bytes; at += 64)
                __builtin_prefetch(next + at);
        }
        if (job->dest != NULL)
            memcpy(job->dest + r * job->row_bytes, src, (size_t)job->row_bytes);
        else
            job->out[r] = score_row(job, src, r);
        if ((r + 1) % PROBE_ROWS == 0) {
            long long now = clock_ns();
            if (now - start > PROBE_NS && major_faults() != faults)
                return r + 1;
            start = now;
        }
    }
    return job->n;
}

/* every row: from the map first where there is one, then (or else) by rows_core */
static long long serve_rows(row_job *job) {
    if (job->map == NULL)
        return rows_core(job);
    Py_ssize_t done = map_rows(job);
    if (done == job->n)
        return -1;
    job->cold = 1;
    row_job rest = *job;
    rest.rows += done;
    rest.n -= done;
    rest.map = NULL;
    if (rest.out != NULL)
        rest.out += done;
    if (rest.dest != NULL)
        rest.dest += done * job->row_bytes;
    if (rest.hat != NULL)
        rest.hat += done;
    return rows_core(&rest);
}

/* obj's bytes in buf (buf->obj NULL where obj is absent or None): 0, or -1 with the error set */
static int optional_buffer(PyObject *obj, Py_buffer *buf) {
    memset(buf, 0, sizeof *buf);
    if (obj == NULL || obj == Py_None)
        return 0;
    return PyObject_GetBuffer(obj, buf, PyBUF_SIMPLE);
}

static void release_optional(Py_buffer *buf) {
    if (buf->obj != NULL)
        PyBuffer_Release(buf);
}

/* the mapped file where it holds every row asked for (rows sorted), else NULL: those rows are read instead */
static const char *map_of(const Py_buffer *map, const int64_t *rows, Py_ssize_t n, Py_ssize_t row_bytes,
                          long long base) {
    if (map->buf == NULL || n == 0 || rows[0] < 0 || base < 0 || base > (long long)map->len)
        return NULL;
    return rows[n - 1] < ((long long)map->len - base) / row_bytes ? (const char *)map->buf : NULL;
}

/* (short, cold), the result of both functions, or the exception of a failed read */
static PyObject *reads_result(long long rc, int cold) {
    if (rc <= -2) {
        errno = (int)(-2 - rc);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return Py_BuildValue("(LN)", rc, PyBool_FromLong(cold));
}

/* the scorer of a kind of row, for this CPU (NULL for an unknown kind) */
static row_scorer scorer_of(int kind) {
#ifdef HAVE_AVX2_PATH
    if (use_avx2())
        return kind == 'f' ? cosine_f32_avx2 : kind == 'h' ? cosine_f16_avx2 : kind == 'b' ? cosine_i8_avx2
             : kind == 'r' ? dot_c8_avx2 : NULL;
#endif
    return kind == 'f' ? cosine_f32 : kind == 'h' ? cosine_f16 : kind == 'b' ? cosine_i8 : kind == 'r' ? dot_c8 : NULL;
}

/* what is wrong with cosines' buffers (NULL: nothing) */
static const char *cosines_refusal(int kind, Py_ssize_t n, Py_ssize_t d, Py_ssize_t row_bytes, const Py_buffer *rows,
                                   const Py_buffer *q, const Py_buffer *a, const Py_buffer *b, const Py_buffer *out,
                                   const Py_buffer *hat) {
    Py_ssize_t width = kind == 'f' ? 4 : kind == 'h' ? 2 : kind == 'b' || kind == 'r' ? 1 : 0;
    if (width == 0)
        return "cosines: kind must be 'f' (float32), 'h' (float16), 'b' (int8) or 'r' (int8 residual)";
    int affine_ok = kind == 'b' ? (a->len == q->len && b->len == q->len) : (a->len == 0 && b->len == 0);
    int hat_ok = kind == 'r' ? (hat->obj != NULL && hat->len == n * (Py_ssize_t)sizeof(float)) : hat->obj == NULL;
    if (rows->len % (Py_ssize_t)sizeof(int64_t) != 0 || q->len % (Py_ssize_t)sizeof(float) != 0 || d == 0 ||
        row_bytes != d * width + (kind == 'r' ? 8 : 0) || out->len != n * (Py_ssize_t)sizeof(float) || !affine_ok ||
        !hat_ok)
        return "cosines: rows int64, q float32 of row_bytes / width values (of row_bytes - 8 for 'r'), a and b "
               "float32 of as many (int8) or empty, hat float32 of len(rows) ('r' only), out float32 of len(rows)";
    return NULL;
}

static PyObject *cosines(PyObject *self, PyObject *args) {
    int fd, kind;
    Py_buffer rows_buf, q_buf, a_buf, b_buf, out_buf, map_buf, hat_buf;
    PyObject *map_obj = NULL, *hat_obj = NULL;
    Py_ssize_t row_bytes;
    long long base;
    if (!PyArg_ParseTuple(args, "iy*nLCy*y*y*w*|OO", &fd, &rows_buf, &row_bytes, &base, &kind, &q_buf, &a_buf, &b_buf,
                          &out_buf, &map_obj, &hat_obj))
        return NULL;
    int got_map = optional_buffer(map_obj, &map_buf) == 0;
    int got_hat = got_map && optional_buffer(hat_obj, &hat_buf) == 0; /* else the buffer's error is set */
    Py_ssize_t n = rows_buf.len / (Py_ssize_t)sizeof(int64_t), d = q_buf.len / (Py_ssize_t)sizeof(float);
    const char *bad = !got_hat ? NULL : cosines_refusal(kind, n, d, row_bytes, &rows_buf, &q_buf, &a_buf, &b_buf,
                                                        &out_buf, &hat_buf);
    char *scratch = NULL;
    Py_ssize_t per_chunk = row_bytes >= CHUNK_BYTES ? 1 : CHUNK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    int ready = got_hat && bad == NULL, nomem = ready && (scratch = malloc((size_t)(per_chunk * row_bytes))) == NULL;
    long long rc = -1;
    row_job job = {.cold = 0};
    if (ready && !nomem) {
        const int64_t *rows = (const int64_t *)rows_buf.buf;
        Py_BEGIN_ALLOW_THREADS
        job = (row_job){.fd = fd, .rows = rows, .n = n, .row_bytes = row_bytes, .per_chunk = per_chunk, .d = d,
                        .base = base, .score = scorer_of(kind), .q = (const float *)q_buf.buf,
                        .a = (const float *)a_buf.buf, .b = (const float *)b_buf.buf,
                        .hat = kind == 'r' ? (const float *)hat_buf.buf : NULL, .scratch = scratch,
                        .out = (float *)out_buf.buf, .map = map_of(&map_buf, rows, n, row_bytes, base)};
        rc = serve_rows(&job);
        Py_END_ALLOW_THREADS
    }
    free(scratch);
    PyBuffer_Release(&rows_buf);
    PyBuffer_Release(&q_buf);
    PyBuffer_Release(&a_buf);
    PyBuffer_Release(&b_buf);
    PyBuffer_Release(&out_buf);
    if (got_map)
        release_optional(&map_buf);
    if (got_hat)
        release_optional(&hat_buf);
    if (!got_hat)
        return NULL;
    if (nomem)
        return PyErr_NoMemory();
    if (bad != NULL) {
        PyErr_SetString(PyExc_ValueError, bad);
        return NULL;
    }
    return reads_result(rc, job.cold);
}

static PyObject *read_rows(PyObject *self, PyObject *args) {
    int fd;
    Py_buffer rows_buf, out_buf, map_buf;
    PyObject *map_obj = NULL;
    Py_ssize_t row_bytes;
    long long base;
    if (!PyArg_ParseTuple(args, "iy*nLw*|O", &fd, &rows_buf, &row_bytes, &base, &out_buf, &map_obj))
        return NULL;
    Py_ssize_t n = rows_buf.len / (Py_ssize_t)sizeof(int64_t);
    int got_map = optional_buffer(map_obj, &map_buf) == 0;
    int bad = rows_buf.len % (Py_ssize_t)sizeof(int64_t) != 0 || row_bytes <= 0 || out_buf.len != n * row_bytes;
    long long rc = -1;
    row_job job = {.cold = 0};
    if (got_map && !bad) {
        const int64_t *rows = (const int64_t *)rows_buf.buf;
        Py_BEGIN_ALLOW_THREADS
        /* no scoring: each run (of any length) read straight into its place in out */
        job = (row_job){.fd = fd, .rows = rows, .n = n, .row_bytes = row_bytes, .per_chunk = n > 0 ? n : 1,
                        .base = base, .dest = (char *)out_buf.buf, .map = map_of(&map_buf, rows, n, row_bytes, base)};
        rc = serve_rows(&job);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&rows_buf);
    PyBuffer_Release(&out_buf);
    if (!got_map)
        return NULL;
    release_optional(&map_buf);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "read_rows: rows must be int64 and out exactly len(rows) * row_bytes bytes");
        return NULL;
    }
    return reads_result(rc, job.cold);
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
