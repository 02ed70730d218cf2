"""What a training run is asked for: the loss (kind, temperatures, Matryoshka widths) and the training
settings (steps, batch, learning rate, frozen layers, sources, checkpoints, device), checked before
anything is loaded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from ..core._util import check_positive_int
from ..core.errors import InputError
from . import losses, modules
from .sampling import SMALL_SOURCES

LOSS_KINDS = ("infonce", "tempagg", "mrl", "tempaggmrl", "tempspecmrl")


@dataclass
class LossConfig:
    kind: str = "infonce"
    tau: float = 0.05
    taus: Sequence[float] = (0.03, 0.06, 0.1)
    dims: Sequence[int] | None = None  # Matryoshka widths (default: d/4, d/2, d)
    tau_by_dim: dict[int, float] | None = None  # TempSpecMRL (default: d/4: 0.03, d/2: 0.06, d: 0.1)
    negative_weight_beta: float = 0.0

    def validate(self, dim: int | None) -> "LossConfig":
        """Check the settings; with the model's width ``dim``, also fill in and check the widths."""
        if self.kind not in LOSS_KINDS:
            raise InputError(f"loss must be one of {', '.join(LOSS_KINDS)}, got {self.kind!r}")
        losses.check_tau(self.tau)
        for t in self.taus:
            losses.check_tau(t)
        for t in (self.tau_by_dim or {}).values():
            losses.check_tau(t)
        if dim is None:
            if self.dims is not None:
                losses.check_dims(list(self.dims))
            return self
        if self.kind in ("mrl", "tempaggmrl"):
            self.dims = losses.check_dims(list(self.dims or [dim // 4, dim // 2, dim]), dim)
        if self.kind == "tempspecmrl":
            spec = self.tau_by_dim or {dim // 4: 0.03, dim // 2: 0.06, dim: 0.1}
            spec = {int(k): losses.check_tau(v) for k, v in spec.items()}
            losses.check_dims(list(spec), dim)
            self.tau_by_dim = spec
        return self

    def label(self) -> str:
        if self.kind == "infonce":
            return f"InfoNCE tau={self.tau:g}"
        if self.kind == "tempagg":
            return f"TempAgg {list(self.taus)}"
        if self.kind == "mrl":
            return f"MRL tau={self.tau:g} {list(self.dims or [])}"
        if self.kind == "tempaggmrl":
            return f"TempAggMRL {list(self.taus)} {list(self.dims or [])}"
        return f"TempSpecMRL {self.tau_by_dim}"

    def module(
        self, model, *, mini_batch_size: int | None = None, gather_across_devices: bool = False
    ) -> torch.nn.Module:
        """This loss as a sentence-transformers loss module on ``model``; with ``mini_batch_size``,
        wrapped in gradient caching (:class:`~.modules.GradCacheLoss`)."""
        self.validate(modules.model_width(model))
        beta, g = self.negative_weight_beta, gather_across_devices
        if self.kind == "infonce":
            m = modules.InfoNCELoss(model, self.tau, negative_weight_beta=beta, gather_across_devices=g)
        elif self.kind == "tempagg":
            m = modules.TempAggLoss(model, self.taus, negative_weight_beta=beta, gather_across_devices=g)
        elif self.kind == "mrl":
            m = modules.MatryoshkaInfoNCELoss(
                model, self.dims, tau=self.tau, negative_weight_beta=beta, gather_across_devices=g
            )
        elif self.kind == "tempaggmrl":
            m = modules.TempAggMRLLoss(model, self.dims, self.taus, negative_weight_beta=beta, gather_across_devices=g)
        else:
            m = modules.TempSpecMRLLoss(model, self.tau_by_dim, negative_weight_beta=beta, gather_across_devices=g)
        return modules.GradCacheLoss(m, mini_batch_size) if mini_batch_size else m


@dataclass
class TrainConfig:
    model: str | None = None  # local sentence-transformers directory; None: packaged MiniLM
    loss: LossConfig = field(default_factory=LossConfig)
    steps: int = 300
    batch_size: int = 32
    lr: float = 2e-5
    min_lr_ratio: float = 0.1
    warmup_ratio: float = 0.02
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    freeze_layers: int = 0
    max_seq_length: int | None = 128
    homogeneous: bool = True
    small_sources: str = "error"  # sources with fewer pairs than a batch: error, mix (pool them) or drop
    group_by_length: bool = False  # batches of similar length within a source (less padding)
    mini_batch_size: int | None = None  # gradient caching: embed in mini-batches of this size
    checkpoint_every: int = 0  # 0: only at the end
    seed: int = 0
    device: str | None = None

    def validate(self) -> None:
        check_positive_int("steps", self.steps)
        check_positive_int("batch_size (at least 2 for in-batch negatives)", self.batch_size, minimum=2)
        if not self.lr > 0:
            raise InputError(f"lr must be positive, got {self.lr}")
        if not 0 <= self.min_lr_ratio <= 1 or not 0 <= self.warmup_ratio < 1:
            raise InputError("min_lr_ratio must be in [0, 1] and warmup_ratio in [0, 1)")
        if self.freeze_layers < 0:
            raise InputError(f"freeze_layers must be >= 0, got {self.freeze_layers}")
        self.loss.validate(None)
        if self.small_sources not in SMALL_SOURCES:
            raise InputError(f"small_sources must be one of {', '.join(SMALL_SOURCES)}, got {self.small_sources!r}")
        if self.mini_batch_size is not None:
            check_positive_int("mini_batch_size", self.mini_batch_size)
