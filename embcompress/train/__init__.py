"""Training: contrastive fine-tuning of sentence-transformers models whose embeddings compress well.

Importing this package imports torch; ``import embcompress`` does not import it.
"""

from .._util import require

require("torch", "train", "training")
require("sentence_transformers", "train", "training")

from .data import Pair, batches, crop_pairs, dropout_pairs, load_pairs, read_pairs
from .losses import hardest_negative_margin, info_nce, mrl, temp_agg, temp_agg_mrl, temp_spec_mrl
from .trainer import LOSS_KINDS, LossConfig, TrainConfig, cosine_schedule, freeze_first_layers, train

__all__ = [
    "LOSS_KINDS", "LossConfig", "Pair", "TrainConfig", "batches", "cosine_schedule", "crop_pairs", "dropout_pairs",
    "freeze_first_layers", "load_pairs", "hardest_negative_margin", "info_nce", "mrl", "read_pairs", "temp_agg", "temp_agg_mrl",
    "temp_spec_mrl", "train",
]
