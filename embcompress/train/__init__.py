"""Training: contrastive fine-tuning of sentence-transformers models whose embeddings compress well.

The losses are sentence-transformers loss modules (:mod:`.modules`) over pure tensor functions
(:mod:`.losses`); :func:`train` runs them on sentence-transformers' ``SentenceTransformerTrainer``.
Importing this package imports torch; ``import embcompress`` does not import it.
"""

from ..core._util import require

require("torch", "train", "training")
require("sentence_transformers", "train", "training")

from .data import Pair, crop_pairs, dropout_pairs, load_pairs, read_pairs
from .losses import hardest_negative_margin, info_nce, mrl, temp_agg, temp_agg_mrl, temp_spec_mrl
from .modules import (
    GradCacheLoss,
    InfoNCELoss,
    MatryoshkaInfoNCELoss,
    TempAggLoss,
    TempAggMRLLoss,
    TempSpecMRLLoss,
    TemperatureLoss,
)
from .sampling import SourceBatchSampler
from .config import LOSS_KINDS, LossConfig, TrainConfig
from .trainer import freeze_first_layers, train

__all__ = [
    "GradCacheLoss",
    "InfoNCELoss",
    "LOSS_KINDS",
    "LossConfig",
    "MatryoshkaInfoNCELoss",
    "Pair",
    "SourceBatchSampler",
    "TempAggLoss",
    "TempAggMRLLoss",
    "TempSpecMRLLoss",
    "TemperatureLoss",
    "TrainConfig",
    "crop_pairs",
    "dropout_pairs",
    "freeze_first_layers",
    "hardest_negative_margin",
    "info_nce",
    "load_pairs",
    "mrl",
    "read_pairs",
    "temp_agg",
    "temp_agg_mrl",
    "temp_spec_mrl",
    "train",
]
