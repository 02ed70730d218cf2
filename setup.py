"""Build the optional C kernel for Hamming search; everything else is in pyproject.toml.

The extension is optional: where no C compiler is available the install still succeeds and
embcompress.search falls back to a numpy implementation (slower, same results)."""

import platform

from setuptools import Extension, setup

flags = ["-O3"]
if platform.machine().lower() in ("x86_64", "amd64"):
    flags.append("-mpopcnt")  # hardware popcount, present on every x86-64 CPU since 2008

setup(ext_modules=[Extension("embcompress.search._hamming", ["embcompress/search/_hamming.c"],
                             extra_compile_args=flags, optional=True)])
