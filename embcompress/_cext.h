/*
 * What embcompress's C extensions share (include after Python.h).
 *
 * Run-time choice of the AVX2 paths (binarization, the dense code scan): HAVE_AVX2_PATH is
 * defined where such a path can be compiled (x86-64 with GCC or Clang, through
 * __attribute__((target("avx2")))); use_avx2() says whether this CPU can run it, asked once per
 * process.
 *
 * none_or_nomemory(rc): the result of a kernel that returns 0, or -1 when it could not allocate.
 */
#ifndef EMBCOMPRESS_CEXT_H
#define EMBCOMPRESS_CEXT_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2_PATH 1
#endif

static int use_avx2(void) {
#ifdef HAVE_AVX2_PATH
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return cached;
#else
    return 0;
#endif
}

static PyObject *none_or_nomemory(int rc) {
    if (rc) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

#endif
