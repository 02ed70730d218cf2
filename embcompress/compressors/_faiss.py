"""Compressors whose coding runs in a faiss object rebuilt from their saved arrays."""

from __future__ import annotations

from typing import Any

from ..core import persist
from ..core.base import Compressor


class FaissBacked(Compressor):
    """Keeps the faiss quantizer in ``_faiss_obj``: built on first use from the fitted arrays
    (:meth:`_build_faiss`), dropped when the compressor is refitted, loaded or pickled (faiss objects
    do not pickle; the arrays are the state). A load's check of the arrays (:data:`~embcompress.core.persist.PROBING`)
    builds one for its probe and keeps none: a server that loads a model to score codes never builds it."""

    _fit_made = ("_faiss_obj",)

    def _build_faiss(self, d: int) -> Any:
        raise NotImplementedError

    def _faiss(self, d: int | None = None) -> Any:
        if persist.PROBING.get():  # a load's check of the arrays: a quantizer for the probe, not kept
            return self._build_faiss(d or self.n_features_in_)
        if self.__dict__.get("_faiss_obj") is None:
            self.__dict__["_faiss_obj"] = self._build_faiss(d or self.n_features_in_)
        return self.__dict__["_faiss_obj"]

    def _set_state(self, scalars, arrays) -> None:
        super()._set_state(scalars, arrays)
        self.__dict__["_faiss_obj"] = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_faiss_obj", None)
        return state
