/*
 * What embcompress's C extensions share (include after Python.h).
 *
 * Run-time choice of the AVX2 paths (binarization, the dense code scan): HAVE_AVX2_PATH is
 * defined where such a path can be compiled (x86-64 with GCC or Clang, through
 * __attribute__((target("avx2")))); use_avx2() says whether this CPU can run it, asked once per
 * process.
 *
 * none_or_nomemory(rc): the result of a kernel that returns 0, or -1 when it could not allocate.
 *
 * EC_TOPK_HEAP(NAME, T, WORSE): the top-k heap of both scan kernels, over parallel arrays of
 * values (T) and document indices (int64_t), whose root is the worst candidate kept.
 * WORSE(va, ia, vb, ib) is true when (va, ia) ranks below (vb, ib); with ties ranked by lower
 * index, the order is total. It defines NAME_sift_down, NAME_replace_root (a better candidate
 * takes the root's place) and NAME_sort (the heap in place, best first).
 */
#ifndef EMBCOMPRESS_CEXT_H
#define EMBCOMPRESS_CEXT_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2_PATH 1
#endif

#define EC_TOPK_HEAP(NAME, T, WORSE)                                                              \
    static void NAME##_sift_down(T *hv, int64_t *hi, Py_ssize_t k, Py_ssize_t pos) {              \
        for (;;) {                                                                                \
            Py_ssize_t l = 2 * pos + 1, r = l + 1, m = pos;                                       \
            if (l < k && WORSE(hv[l], hi[l], hv[m], hi[m])) m = l;                                \
            if (r < k && WORSE(hv[r], hi[r], hv[m], hi[m])) m = r;                                \
            if (m == pos) return;                                                                 \
            T tv = hv[pos]; hv[pos] = hv[m]; hv[m] = tv;                                          \
            int64_t ti = hi[pos]; hi[pos] = hi[m]; hi[m] = ti;                                    \
            pos = m;                                                                              \
        }                                                                                         \
    }                                                                                             \
    static inline void NAME##_replace_root(T *hv, int64_t *hi, Py_ssize_t k, T v, int64_t j) {    \
        hv[0] = v;                                                                                \
        hi[0] = j;                                                                                \
        NAME##_sift_down(hv, hi, k, 0);                                                           \
    }                                                                                             \
    static void NAME##_sort(T *hv, int64_t *hi, Py_ssize_t k) {                                   \
        for (Py_ssize_t end = k - 1; end > 0; end--) {                                            \
            T tv = hv[0]; hv[0] = hv[end]; hv[end] = tv;                                          \
            int64_t ti = hi[0]; hi[0] = hi[end]; hi[end] = ti;                                    \
            NAME##_sift_down(hv, hi, end, 0);                                                     \
        }                                                                                         \
    }

static inline int use_avx2(void) {
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

static inline PyObject *none_or_nomemory(int rc) {
    if (rc) return PyErr_NoMemory();
    Py_RETURN_NONE;
}

#endif
