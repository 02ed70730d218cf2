"""Compressors; importing this package registers them all. The import order is the registration
order, in which recommend and the report list the code families: cheapest to richest."""

from .truncate import Truncate
from .random_select import RandomSelect
from .random_projection import RandomProjection
from .pca import PCA
from .geopres import Autoencoder, GeoPres
from ._learned import fit_together
from .rotate import Rotate
from .itq import ITQ
from .int8 import Int8
from .binary import Binary, pack_bits, unpack_signs
from .sq import SQ
from .pq import OPQ, PQ
from .rq import RQ
from .rabitq import RaBitQ
from .normalize import Normalize
from .pipeline import Pipeline

__all__ = [
    "Autoencoder",
    "Binary",
    "GeoPres",
    "ITQ",
    "Int8",
    "Normalize",
    "OPQ",
    "PCA",
    "PQ",
    "Pipeline",
    "RaBitQ",
    "RandomProjection",
    "RandomSelect",
    "Rotate",
    "RQ",
    "SQ",
    "Truncate",
    "fit_together",
    "pack_bits",
    "unpack_signs",
]
