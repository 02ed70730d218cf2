"""embcompress: post-training compression of embeddings, measured on your own data.

>>> import embcompress, numpy as np
>>> X = np.random.default_rng(0).standard_normal((1000, 64)).astype("float32")
>>> c = embcompress.from_spec("pca:16+binary").fit(X)
>>> c.transform(X[:2]).shape, c.output_spec.nbytes
((2, 2), 2)

Importing this package does not import torch or sentence-transformers.
"""

from ._version import __version__
from .base import Compressor, OutputSpec  # noqa: E402
from . import compressors  # noqa: E402  (registers every family)
from .compressors import *  # noqa: E402,F401,F403  (every family's class: compressors.__all__)
from .errors import EmbcompressError, FormatError, InputError, MissingDependency, NotFittedError, OutputExistsError  # noqa: E402
from .persist import describe, load, save  # noqa: E402
from .registry import available, from_spec, get, register  # noqa: E402

__all__ = [
    "Compressor", "EmbcompressError", "FormatError", "InputError", "MissingDependency", "NotFittedError", "OutputExistsError",
    "OutputSpec",
    "available", "describe", "from_spec", "get", "load", "register", "save", "__version__", *compressors.__all__,
]
