"""Build the optional C kernels (six extensions: the Hamming scan, the lookup-table and dense code scans, the 4-bit fast scan,
parquet level and dictionary decoding, binarization and RaBitQ grid codes, and positioned reads of a
rescoring copy's rows); everything else is in pyproject.toml.

The extensions are optional: where no C compiler is available the install still succeeds and
embcompress falls back to numpy implementations (slower, same results)."""

import platform

from setuptools import Extension, setup

flags = ["-O3"]
if platform.machine().lower() in ("x86_64", "amd64"):
    flags.append("-mpopcnt")  # hardware popcount, present on every x86-64 CPU since 2008

setup(
    ext_modules=[
        Extension(
            "embcompress.search._hamming",
            ["embcompress/search/_hamming.c"],
            depends=["embcompress/_cext.h"],
            extra_compile_args=flags,
            optional=True,
        ),
        # top-k over byte codes scored with lookup tables (PQ, RQ) or decoded per dimension (SQ, RaBitQ);
        # no fused multiply-adds, so its AVX2 path (chosen at run time) and the portable one agree exactly
        Extension(
            "embcompress.search._adc",
            ["embcompress/search/_adc.c"],
            depends=["embcompress/_cext.h"],
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        ),
        # top-k over 4-bit codebook codes with 8-bit tables in vector registers (fast scan); the same float
        # arithmetic in its AVX2 and portable paths (no fused multiply-adds), so both give the same results
        Extension(
            "embcompress.search._fastscan",
            ["embcompress/search/_fastscan.c"],
            depends=["embcompress/_cext.h"],
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        ),
        # parquet RLE/bit-packed levels and dictionary indices, for the direct decoder of float vector pages
        Extension("embcompress.io._rle", ["embcompress/io/_rle.c"], extra_compile_args=["-O3"], optional=True),
        # the rescoring copy's rows read by pread, one call per run of neighbouring rows, without the GIL, and
        # scored as they are read (no fused multiply-adds: its AVX2 path and the portable one agree exactly)
        Extension(
            "embcompress.io._pread",
            ["embcompress/io/_pread.c"],
            depends=["embcompress/_cext.h"],
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        ),
        # fused threshold-and-pack for binarization (its AVX2 path is chosen at run time, not at build),
        # and the exact best grid code of multi-bit RaBitQ
        # (no errno from sqrt, so RaBitQ's cosines vectorize; IEEE sqrt is exactly rounded either way)
        Extension(
            "embcompress.compressors._pack",
            ["embcompress/compressors/_pack.c"],
            depends=["embcompress/_cext.h"],
            extra_compile_args=["-O3", "-fno-math-errno"],
            optional=True,
        ),
    ]
)
