"""embcompress: post-training compression of embeddings, measured on your own data.

>>> import embcompress, numpy as np
>>> X = np.random.default_rng(0).standard_normal((1000, 64)).astype("float32")
>>> c = embcompress.from_spec("pca:16+binary").fit(X)
>>> c.transform(X[:2]).shape, c.output_spec.nbytes
((2, 2), 2)

Importing this package does not import torch or sentence-transformers.
"""

from ._version import __version__
from .core.base import Compressor
from .core.specs import OutputSpec
from . import compressors  # noqa: E402  (registers every family)
from .compressors import *  # noqa: E402,F401,F403  (every family's class: compressors.__all__)
from .core.errors import (  # noqa: E402
    EmbcompressError,
    FormatError,
    InputError,
    MissingDependency,
    NotFittedError,
    OutputExistsError,
)
from .core.persist import describe, load, save  # noqa: E402
from .core.registry import available, from_spec, get, register  # noqa: E402
from . import _moved  # noqa: E402

_moved.install()  # the import paths of modules that moved into the layers keep working

#: the layers, lowest first: a module imports from its own layer or lower ones, never higher
#: (tests/package/test_layers.py checks every import against this order and that no layer is missing)
LAYERS = (
    "core",
    "io",
    "compressors",
    "engines",
    "search",
    "serving",
    "analysis",
    "embedding",
    "evaluation",
    "report",
    "train",
    "cli",
)

__all__ = [
    "Compressor",
    "EmbcompressError",
    "FormatError",
    "InputError",
    "MissingDependency",
    "NotFittedError",
    "OutputExistsError",
    "OutputSpec",
    "available",
    "describe",
    "from_spec",
    "get",
    "load",
    "register",
    "save",
    "__version__",
    *compressors.__all__,
]
