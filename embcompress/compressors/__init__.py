"""Compressors; importing this package registers them all."""

from .binary import Binary, pack_bits, unpack_signs
from .geopres import Autoencoder, GeoPres
from .int8 import Int8
from .pca import PCA
from .pipeline import Pipeline
from .random_projection import RandomProjection
from .random_select import RandomSelect
from .truncate import Truncate

__all__ = ["Autoencoder", "Binary", "GeoPres", "Int8", "PCA", "Pipeline", "RandomProjection", "RandomSelect", "Truncate", "pack_bits", "unpack_signs"]
