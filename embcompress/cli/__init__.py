"""The ``embcompress`` command line: a thin layer over the library (installed as ``embcompress.cli``)."""
