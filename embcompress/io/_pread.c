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
 *   ValueError on buffers of the wrong size. The GIL is released while it reads.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

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
    const int64_t *rows = (const int64_t *)rows_buf.buf;
    char *out = (char *)out_buf.buf;
    int err = 0;
    long long short_row = -1;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t i = 0;
    while (i < n && err == 0 && short_row < 0) {
        Py_ssize_t j = i + 1;
        while (j < n && rows[j] == rows[j - 1] + 1)
            j++;
        size_t want = (size_t)(j - i) * (size_t)row_bytes, done = 0;
        char *dst = out + i * row_bytes;
        off_t at = (off_t)(base + (long long)rows[i] * (long long)row_bytes);
        while (done < want) {
            ssize_t got = pread(fd, dst + done, want - done, at + (off_t)done);
            if (got < 0) {
                if (errno == EINTR)
                    continue;
                err = errno;
                break;
            }
            if (got == 0) {
                short_row = rows[i];
                break;
            }
            done += (size_t)got;
        }
        i = j;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&rows_buf);
    PyBuffer_Release(&out_buf);
    if (err != 0) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLongLong(short_row);
}

static PyMethodDef methods[] = {
    {"read_rows", read_rows, METH_VARARGS, "Read sorted rows of a file by positioned reads, one per run."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pread", NULL, -1, methods};

PyMODINIT_FUNC PyInit__pread(void) { return PyModule_Create(&module); }
