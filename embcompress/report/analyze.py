"""Intrinsic dimensionality of a vector file of any size: a streamed covariance, its eigenvalues,
the explained-variance curve and where it crosses common shares of the variance."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..analysis import intrinsic_dimensionality
from ..compressors import PCA
from ..compressors.pca import components_for_variance
from ..core.errors import InputError
from ..core._fs import atomic_file
from ..io import check_output_path, open_vectors
from ..engines.local import fit_file

MARKS = (0.5, 0.8, 0.9, 0.95, 0.99)
CURVE_SUFFIXES = (".csv", ".json")


def write_curve(path: str | os.PathLike, ratio: np.ndarray, *, overwrite: bool = False) -> Path:
    """The explained-variance curve (per component and cumulative) as .csv or .json, written to a
    temporary name and renamed."""
    path = Path(path)
    if path.suffix not in CURVE_SUFFIXES:
        raise InputError(f"the curve is written as .csv or .json, got {path.name}")
    check_output_path(path, overwrite=overwrite)
    cum = np.cumsum(ratio)
    if path.suffix == ".csv":
        text = "component,explained_variance_ratio,cumulative\n" + "".join(
            f"{i + 1},{r:.8f},{c:.8f}\n" for i, (r, c) in enumerate(zip(ratio, cum))
        )
    else:
        text = json.dumps({"explained_variance_ratio": ratio.tolist(), "cumulative": cum.tolist()})
    with atomic_file(path, overwrite=overwrite) as tmp:
        tmp.write_text(text)
    return path


def analyze_file(
    path: str | os.PathLike,
    *,
    threshold: float = 0.95,
    curve: str | os.PathLike | None = None,
    max_rows: int | None = None,
    column: str | None = None,
    batch_size: int | None = None,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Stream the file once (up to ``max_rows`` rows) into a covariance and report the fewest
    components explaining ``threshold`` of the variance, with the curve written to ``curve``."""
    if curve is not None:
        if Path(curve).suffix not in CURVE_SUFFIXES:
            raise InputError(f"the curve is written as .csv or .json, got {Path(curve).name}")
        check_output_path(curve, overwrite=overwrite)
    src = open_vectors(path, column=column)
    rows = min(src.num_rows, max_rows or src.num_rows)
    pca = fit_file(PCA(dim=src.dim), path, column=column, batch_size=batch_size, max_rows=max_rows, progress=progress)
    intr = intrinsic_dimensionality(None, threshold, eigenvalues=pca.eigenvalues_)
    cum = np.cumsum(intr.explained_variance_ratio)
    marks = {f"components_for_{int(round(100 * t))}pct": components_for_variance(pca.eigenvalues_, t) for t in MARKS}
    result = {
        "path": str(path),
        "rows": rows,
        "width": src.dim,
        "threshold": threshold,
        "intrinsic_dimensionality": intr.components,
        "ratio_of_width": intr.components / src.dim,
        **marks,
        "first_5_components_explain": float(cum[min(4, len(cum) - 1)]),
        "top10_explained_variance": intr.explained_variance_ratio[:10].round(5).tolist(),
    }
    if not np.sum(pca.eigenvalues_) > 0:
        result["note"] = "the vectors do not vary (total variance 0): no component explains anything, every count is 0"
    if curve is not None:
        result["curve"] = str(write_curve(curve, intr.explained_variance_ratio, overwrite=overwrite))
    return result
