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
#: no fused multiply-adds: a kernel's AVX2 path (chosen at run time) and its portable one agree bit for bit
EXACT_FLOAT = ["-O3", "-ffp-contract=off"]


def kernel(name: str, compile_args: list[str]) -> Extension:
    """The optional extension ``embcompress.NAME`` from ``embcompress/NAME.c``, built with the shared header."""
    source = "embcompress/" + name.replace(".", "/") + ".c"
    return Extension(
        f"embcompress.{name}", [source], depends=["embcompress/_cext.h"], extra_compile_args=compile_args, optional=True
    )


setup(
    ext_modules=[
        kernel("search._hamming", flags),
        # top-k over byte codes scored with lookup tables (PQ, RQ) or decoded per dimension (SQ, RaBitQ)
        kernel("search._adc", EXACT_FLOAT),
        # top-k over 4-bit codebook codes with 8-bit tables in vector registers (fast scan)
        kernel("search._fastscan", EXACT_FLOAT),
        # parquet RLE/bit-packed levels and dictionary indices, for the direct decoder of float vector pages
        Extension("embcompress.io._rle", ["embcompress/io/_rle.c"], extra_compile_args=["-O3"], optional=True),
        # the rescoring copy's rows read by pread, one call per run of neighbouring rows, without the GIL, and
        # scored as they are read
        kernel("io._pread", EXACT_FLOAT),
        # fused threshold-and-pack for binarization (its AVX2 path is chosen at run time, not at build),
        # and the exact best grid code of multi-bit RaBitQ
        # (no errno from sqrt, so RaBitQ's cosines vectorize; IEEE sqrt is exactly rounded either way)
        kernel("compressors._pack", ["-O3", "-fno-math-errno"]),
    ]
)
