"""Fine-tune a sentence-transformers model with the temperature-controlled contrastive losses.

Recipe (Dinu et al., 2025, appendix A, scaled for small models on small hardware): AdamW with weight decay
0.1, cosine schedule with linear warm-up (2% of the steps, as 58 of 3,000 there) down to a minimum
learning-rate ratio of 0.1, gradient clipping at 1.0. The paper's learning rate 5e-6 is for a 356M
model at a global batch of 4,096; the default here is 2e-5 for MiniLM-sized models at batch 32-256.
Optional freezing of the embeddings and first N transformer layers ("Cropping outperforms dropout", 2025: tuning the last
layers is nearly as good), bf16 autocast on CUDA, checkpoints every N steps with resume.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from .._fs import check_output_dir
from .._util import check_positive_int, pick_device
from ..embed import load_model, resolve_model_path
from ..errors import InputError
from . import losses
from .data import Pair, batches

LOSS_KINDS = ("infonce", "tempagg", "mrl", "tempaggmrl", "tempspecmrl")


@dataclass
class LossConfig:
    kind: str = "infonce"
    tau: float = 0.05
    taus: Sequence[float] = (0.03, 0.06, 0.1)
    dims: Sequence[int] | None = None  # Matryoshka widths (default: d/4, d/2, d)
    tau_by_dim: dict[int, float] | None = None  # TempSpecMRL (default: d/4: 0.03, d/2: 0.06, d: 0.1)
    negative_weight_beta: float = 0.0

    def validate(self, dim: int) -> "LossConfig":
        if self.kind not in LOSS_KINDS:
            raise InputError(f"loss must be one of {', '.join(LOSS_KINDS)}, got {self.kind!r}")
        losses.check_tau(self.tau)
        for t in self.taus:
            losses.check_tau(t)
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

    def __call__(self, a: torch.Tensor, p: torch.Tensor, n: torch.Tensor | None) -> torch.Tensor:
        beta = self.negative_weight_beta
        if self.kind == "infonce":
            return losses.info_nce(a, p, n, tau=self.tau, negative_weight_beta=beta)
        if self.kind == "tempagg":
            return losses.temp_agg(a, p, n, taus=self.taus, negative_weight_beta=beta)
        if self.kind == "mrl":
            return losses.mrl(losses.info_nce, a, p, n, dims=self.dims, tau=self.tau, negative_weight_beta=beta)
        if self.kind == "tempaggmrl":
            return losses.temp_agg_mrl(a, p, n, dims=self.dims, taus=self.taus, negative_weight_beta=beta)
        return losses.temp_spec_mrl(a, p, n, tau_by_dim=self.tau_by_dim, negative_weight_beta=beta)


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


def cosine_schedule(step: int, total: int, warmup: int, min_ratio: float) -> float:
    """Learning-rate factor: linear warm-up to 1, then cosine decay to ``min_ratio``."""
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def _encoder_layers(model) -> tuple[Any, list]:
    """The transformer's embeddings module and its list of layers (BERT-, MPNet-, RoBERTa-like)."""
    auto = model[0].auto_model
    embeddings = getattr(auto, "embeddings", None)
    enc = getattr(auto, "encoder", None)
    layers = list(getattr(enc, "layer", []) or getattr(enc, "layers", []) or [])
    return embeddings, layers


def freeze_first_layers(model, n: int) -> int:
    """Freeze the embeddings and the first ``n`` transformer layers; returns the layer count."""
    embeddings, layers = _encoder_layers(model)
    if n > len(layers):
        raise InputError(f"cannot freeze {n} layers: the model has {len(layers)}")
    if n > 0:
        for module in [embeddings, *layers[:n]]:
            if module is not None:
                for p in module.parameters():
                    p.requires_grad_(False)
    return len(layers)



def train(pairs: Sequence[Pair], out_dir: str | os.PathLike, config: TrainConfig, *, resume: bool = False,
          overwrite: bool = False, model=None, progress: Callable[[int, float], None] | None = None) -> dict[str, Any]:
    """Fine-tune and save a sentence-transformers model directory in ``out_dir``.

    Checkpoints (model + optimizer + scheduler + step, loaded with ``weights_only=True``) go to
    ``out_dir/checkpoint``; ``resume=True`` continues from there. Returns a summary with the loss
    curve and the throughput (pairs/s)."""
    config.validate()
    out = Path(out_dir)
    ckpt = out / "checkpoint"
    if not resume:
        check_output_dir(out, overwrite=overwrite)
    if resume and not (ckpt / "state.pt").exists():
        raise InputError(f"nothing to resume: {ckpt / 'state.pt'} does not exist")
    if not pairs or len(pairs) < 2:
        raise InputError("training needs at least 2 pairs")
    device = pick_device(config.device)
    if model is None:
        resolve_model_path(config.model)  # clear error before any loading
        model = load_model(str(ckpt / "model") if resume else config.model, device=device)
    model.to(device)
    dim = (getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension)()
    config.loss.validate(dim)
    if config.max_seq_length:
        model.max_seq_length = config.max_seq_length
    n_layers = freeze_first_layers(model, config.freeze_layers)
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]  # biases and LayerNorm weights
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=config.lr)
    warm = int(round(config.warmup_ratio * config.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: cosine_schedule(s, config.steps, warm, config.min_lr_ratio))
    start, history = 0, []
    if resume:
        state = torch.load(ckpt / "state.pt", map_location=device, weights_only=True)
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start = int(state["step"])
        history = json.loads((ckpt / "history.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    use_bf16 = device.startswith("cuda") and torch.cuda.is_bf16_supported()
    torch.manual_seed(config.seed + start)
    it = batches(pairs, config.batch_size, homogeneous=config.homogeneous, seed=config.seed)
    for _ in range(start):  # the same batch order after a resume
        next(it)
    has_neg = any(p.negative for p in pairs)
    model.train()
    t0 = time.perf_counter()
    n_pairs = 0

    def embed(texts: list[str]) -> torch.Tensor:
        prepare = getattr(model, "preprocess", None) or model.tokenize  # renamed in sentence-transformers 6
        feats = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in prepare(texts).items()}
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_bf16):
            return model(feats)["sentence_embedding"].float()  # (n, dim)

    def save_checkpoint(step: int) -> None:
        tmp = out / ".checkpoint.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save(str(tmp / "model"))
        torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "step": step}, tmp / "state.pt")
        (tmp / "history.json").write_text(json.dumps(history))
        shutil.rmtree(ckpt, ignore_errors=True)
        os.replace(tmp, ckpt)

    for step in range(start, config.steps):
        idx = next(it)
        batch = [pairs[i] for i in idx]
        a = embed([p.anchor for p in batch])  # (B, dim)
        pos = embed([p.positive for p in batch])  # (B, dim)
        neg = None
        if has_neg:
            with_neg = [p.negative or p.positive for p in batch]  # pairs without one reuse their positive
            neg = embed(with_neg)[:, None, :]  # (B, 1, dim)
        loss = config.loss(a, pos, neg)
        if not torch.isfinite(loss):
            raise InputError(f"the loss became {float(loss)} at step {step}; lower the learning rate (now {config.lr})")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip:
            torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
        opt.step()
        sched.step()
        n_pairs += len(batch)
        history.append({"step": step + 1, "loss": float(loss.detach()), "lr": sched.get_last_lr()[0]})
        if progress:
            progress(step + 1, float(loss.detach()))
        if config.checkpoint_every and (step + 1) % config.checkpoint_every == 0 and step + 1 < config.steps:
            save_checkpoint(step + 1)
    seconds = time.perf_counter() - t0
    model.eval()
    final = out / "model"
    if final.exists():
        shutil.rmtree(final)
    model.save(str(final))
    save_checkpoint(config.steps)
    summary = {"output": str(final), "steps": config.steps, "resumed_from": start, "device": device, "bf16": use_bf16,
               "layers": n_layers, "frozen_layers": config.freeze_layers, "loss": config.loss.label(),
               "seconds": seconds, "pairs_per_second": n_pairs / seconds if seconds > 0 else float("nan"),
               "first_loss": history[0]["loss"] if history else None, "last_loss": history[-1]["loss"] if history else None,
               "config": {**asdict(config), "loss": {**asdict(config.loss), "taus": list(config.loss.taus)}}}
    (out / "train_summary.json").write_text(json.dumps({**summary, "history": history}, indent=2, default=str))
    return summary
