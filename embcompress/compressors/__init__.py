"""Compressors; importing this package registers them all."""

from .binary import Binary, pack_bits, unpack_signs
from .geopres import Autoencoder, GeoPres
from .int8 import Int8
from .itq import ITQ
from .pca import PCA
from .pipeline import Pipeline
from .pq import OPQ, PQ
from .rabitq import RaBitQ
from .rq import RQ
from .random_projection import RandomProjection
from .random_select import RandomSelect
from .rotate import Rotate
from .sq import SQ
from .truncate import Truncate

__all__ = ["Autoencoder", "Binary", "GeoPres", "ITQ", "Int8", "OPQ", "PCA", "PQ", "Pipeline", "RaBitQ", "RandomProjection", "RandomSelect", "Rotate", "RQ",
           "SQ", "Truncate", "pack_bits", "unpack_signs"]
