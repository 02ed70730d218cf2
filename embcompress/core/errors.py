"""Exceptions raised by embcompress.

Every error a user can trigger with bad input is an :class:`EmbcompressError`; the CLI turns
those into one line on stderr and exit code 1. Anything else is a bug and keeps its traceback.
"""


class EmbcompressError(Exception):
    """Base class for errors caused by input, files or configuration (not by bugs)."""


class InputError(EmbcompressError, ValueError):
    """The data handed in is not what the operation accepts (dtype, width, NaN, ragged rows...)."""


class NotFittedError(EmbcompressError, ValueError, AttributeError):
    """A compressor was used before ``fit`` (a ValueError and AttributeError, as scikit-learn's)."""


class FormatError(EmbcompressError):
    """A saved model or a file is unreadable, of an unknown format version, or corrupt."""


class OutputExistsError(EmbcompressError, FileExistsError):
    """Refusing to replace an existing output without ``overwrite=True``."""


class MissingDependency(InputError):
    """An optional dependency the operation needs is not installed; the message names the extra
    that installs it."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none): what a one-line
    error quotes of a library's failure."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
