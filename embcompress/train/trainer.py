"""Fine-tune a sentence-transformers model with the temperature-controlled contrastive losses, on
sentence-transformers' own ``SentenceTransformerTrainer`` (the Hugging Face Trainer underneath).

Recipe (Dinu et al., 2025, appendix A, scaled for small models on small hardware): AdamW with weight
decay 0.1 (not on biases and LayerNorm weights), linear warm-up over 2% of the steps (58 of 3,000
there) then cosine decay to 0.1 of the peak learning rate, gradient clipping at 1.0, homogeneous
batches by source. The paper's learning rate 5e-6 is for a 356M model at a global batch of 4,096;
the default here is 2e-5 for MiniLM-sized models. Optional freezing of the embeddings and the first
N transformer layers ("Cropping outperforms dropout", 2025: tuning the last layers is nearly as
good). The trainer provides checkpoints and resume, bf16 on CUDA, and data parallelism: run the same
command under ``torchrun --nproc_per_node N`` (or ``embcompress train --nproc N``) and the loss
gathers every process's embeddings, so N processes train on the same global batches, with the same
loss, as one.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ..core._fs import check_output_dir
from ..core._util import pick_device
from ..embedding.embed import load_model, resolve_model_path
from ..core.errors import InputError
from .config import TrainConfig
from .data import Pair
from .sampling import FixedSampler, SourceBatchSampler


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


def process_world() -> tuple[int, int, int]:
    """(world size, rank, local rank) of this process: from torchrun's environment, else (1, 0, 0)."""
    env = os.environ
    return int(env.get("WORLD_SIZE", "1")), int(env.get("RANK", "0")), int(env.get("LOCAL_RANK", "0"))


def _trainer_classes():
    try:
        from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
        from transformers import PrinterCallback, TrainerCallback
        from transformers.utils import logging as hf_logging

        __import__("datasets")  # the trainer needs it: a clear error here rather than deep inside
    except ImportError as exc:
        raise InputError(
            f"training needs sentence-transformers' trainer and its dependencies ({exc.name} is missing); "
            "pip install 'embcompress[train]'"
        ) from None
    return (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
        TrainerCallback,
        PrinterCallback,
        hf_logging,
    )


def last_checkpoint(directory: Path) -> Path | None:
    """The trainer checkpoint with the most steps in ``directory`` (``checkpoint-N``), if any."""
    found = (
        [
            (int(p.name.split("-")[1]), p)
            for p in directory.glob("checkpoint-*")
            if p.name.split("-")[1].isdigit() and (p / "trainer_state.json").exists()
        ]
        if directory.is_dir()
        else []
    )
    return max(found)[1] if found else None


def train_dataset(pairs: Sequence[Pair]):
    """A ``datasets.Dataset`` with columns anchor, positive[, negative] (a pair without a negative
    reuses its positive there); no source column: the sampler holds the sources."""
    from datasets import Dataset

    cols = {"anchor": [p.anchor for p in pairs], "positive": [p.positive for p in pairs]}
    if any(p.negative for p in pairs):
        cols["negative"] = [p.negative or p.positive for p in pairs]
    return Dataset.from_dict(cols)


def make_sampler(pairs: Sequence[Pair], config: TrainConfig, world: int = 1) -> SourceBatchSampler:
    """The batches ``config`` asks for over ``pairs`` on ``world`` processes (errors for sources
    smaller than a batch, or a batch that does not split evenly, come from here)."""
    return SourceBatchSampler(
        [p.source for p in pairs],
        config.batch_size,
        world_size=world,
        seed=config.seed,
        homogeneous=config.homogeneous,
        small_sources=config.small_sources,
        lengths=[len(p.anchor) + len(p.positive) for p in pairs] if config.group_by_length else None,
    )


def train(
    pairs: Sequence[Pair],
    out_dir: str | os.PathLike,
    config: TrainConfig,
    *,
    resume: bool = False,
    overwrite: bool = False,
    model=None,
    progress: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Fine-tune with ``SentenceTransformerTrainer`` and save the model directory ``out_dir/model``.

    Trainer checkpoints (model, optimizer, scheduler, sampler epoch) go to ``out_dir/checkpoints``
    every ``config.checkpoint_every`` steps; ``resume=True`` continues from the latest. Under
    ``torchrun`` every process runs this function; ``config.batch_size`` is the global batch, split
    evenly, and only the first process writes the model and the summary. Returns a summary with the
    loss curve and the throughput (pairs/s over the training steps)."""
    Trainer, Args, Callback, PrinterCallback, hf_logging = _trainer_classes()
    config.validate()
    world, rank, local_rank = process_world()
    out, ckpts = Path(out_dir), Path(out_dir) / "checkpoints"
    latest = _checkpoint_to_resume(out, resume=resume, overwrite=overwrite)
    _check_inputs(pairs, config, model)
    sampler = make_sampler(pairs, config, world)
    device = _process_device(config.device, world, local_rank)
    model, loss, n_layers = _model_and_loss(model, config, device, world)
    use_bf16 = device.startswith("cuda") and torch.cuda.is_bf16_supported()
    if rank == 0 and not resume and overwrite:
        for old in (ckpts, out / "model"):
            shutil.rmtree(old, ignore_errors=True)
    log = _step_log(Callback, progress)
    args = _training_args(Args, config, ckpts, sampler, world=world, device=device, bf16=use_bf16)
    trainer = Trainer(model=model, args=args, train_dataset=train_dataset(pairs), loss=loss, callbacks=[log])
    trainer.remove_callback(PrinterCallback)  # the summary and the progress callback report instead
    hf_logging.disable_progress_bar()
    start = int(json.loads((latest / "trainer_state.json").read_text())["global_step"]) if latest else 0
    log.t0 = t0 = time.perf_counter()  # the history's "seconds" count from here
    trainer.train(resume_from_checkpoint=str(latest) if latest else None)
    seconds = time.perf_counter() - t0
    history = _history(trainer.state.log_history, log.seconds_at)  # with the steps before a resume
    summary = {
        "output": str(out / "model"),
        "steps": config.steps,
        "resumed_from": start,
        "device": device,
        "bf16": use_bf16,
        "processes": world,
        "layers": n_layers,
        **_run_figures(config, start, seconds, history),
    }
    if trainer.is_world_process_zero():
        model.eval()
        _save_model(trainer, out, {**summary, "history": history})
    del trainer, loss, model  # before the process group goes: see _leave_process_group
    _leave_process_group(world)
    return summary


def _check_inputs(pairs: Sequence[Pair], config: TrainConfig, model) -> None:
    """Clear errors before anything is read or loaded: the model directory, and at least 2 pairs."""
    if model is None:
        resolve_model_path(config.model)
    if not pairs or len(pairs) < 2:
        raise InputError("training needs at least 2 pairs")


def _model_and_loss(model, config: TrainConfig, device: str, world: int):
    """(the model on ``device``, its loss module, the layers frozen): the loss module checks the widths
    against the model before the model is changed (its sequence length, its frozen layers)."""
    if model is None:
        model = load_model(config.model, device=device)
    model.to(device)
    loss = config.loss.module(model, mini_batch_size=config.mini_batch_size, gather_across_devices=world > 1)
    if config.max_seq_length:
        model.max_seq_length = config.max_seq_length
    return model, loss, freeze_first_layers(model, config.freeze_layers)


def _step_log(Callback: type, progress: Callable[[int, float], None] | None):
    """A trainer callback that notes the seconds at each logged step (counted from its ``t0``, set when
    training starts) and reports (step, loss) to ``progress``."""

    class _Log(Callback):
        def __init__(self):
            super().__init__()
            self.t0, self.seconds_at = 0.0, {}

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                self.seconds_at[state.global_step] = time.perf_counter() - self.t0
                if progress:
                    progress(state.global_step, float(logs["loss"]))

    return _Log()


def _history(log_history: list[dict], seconds_at: dict[int, float]) -> list[dict[str, Any]]:
    """The loss curve from the trainer's log: step, loss, learning rate and, where noted, seconds."""
    return [
        {
            "step": e["step"],
            "loss": float(e["loss"]),
            "lr": float(e.get("learning_rate", float("nan"))),
            **({"seconds": seconds_at[e["step"]]} if e["step"] in seconds_at else {}),
        }
        for e in log_history
        if "loss" in e
    ]


def _leave_process_group(world: int) -> None:
    """Under torchrun: wait for the first process's save, then take the process group down before the
    process exits; left to the interpreter's exit, gloo's threads now and then aborted a process
    ("terminate called without an active exception", SIGABRT) and torchrun failed the run.

    The caller drops the trainer, its distributed wrapper and the loss first, and they are collected
    here, while every process is still here: freed when ``train`` returned, after the other process
    had left, one of their destructors now and then waited on it for ever (a hang of ``train
    --nproc 2`` under load)."""
    import torch.distributed as dist

    gc.collect()
    if world > 1 and dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _run_figures(config: TrainConfig, start: int, seconds: float, history: list[dict]) -> dict[str, Any]:
    """The summary's figures of a run: time, throughput (pairs/s over the steps run here), first and
    last loss, and the configuration."""
    n_pairs = (config.steps - start) * config.batch_size
    return {
        "frozen_layers": config.freeze_layers,
        "loss": config.loss.label(),
        "seconds": seconds,
        "pairs_per_second": n_pairs / seconds if seconds > 0 else float("nan"),
        "first_loss": history[0]["loss"] if history else None,
        "last_loss": history[-1]["loss"] if history else None,
        "config": {**asdict(config), "loss": {**asdict(config.loss), "taus": list(config.loss.taus)}},
    }


def _process_device(asked: str | None, world: int, local_rank: int) -> str:
    """The device of this process: the one asked (or the best there is), and under torchrun on
    CUDA the GPU of its local rank."""
    device = pick_device(asked)
    if device.startswith("cuda") and world > 1:
        device = f"cuda:{local_rank}"
    return device


def _checkpoint_to_resume(out: Path, *, resume: bool, overwrite: bool) -> Path | None:
    """The latest trainer checkpoint under ``out/checkpoints`` when resuming (an InputError when there
    is none); otherwise None, once ``out`` is known to be writable."""
    if not resume:
        check_output_dir(out, overwrite=overwrite)
        return None
    latest = last_checkpoint(out / "checkpoints")
    if latest is None:
        raise InputError(
            f"nothing to resume: {out / 'checkpoints'} holds no trainer checkpoint (checkpoint-N); "
            "train with --checkpoint-every first"
        )
    return latest


def _training_args(Args, config: TrainConfig, ckpts: Path, sampler, *, world: int, device: str, bf16: bool):
    """The trainer's arguments: the global batch split over ``world`` processes, a cosine schedule
    with warm-up down to ``min_lr_ratio``, our sampler's batches, checkpoints as asked."""
    return Args(
        output_dir=str(ckpts),
        max_steps=config.steps,
        per_device_train_batch_size=config.batch_size // world,
        learning_rate=config.lr,
        weight_decay=config.weight_decay,
        max_grad_norm=config.grad_clip or 0.0,
        warmup_steps=int(round(config.warmup_ratio * config.steps)),
        lr_scheduler_type="cosine_with_min_lr",
        lr_scheduler_kwargs={"min_lr_rate": config.min_lr_ratio},
        batch_sampler=FixedSampler(sampler),
        dataloader_drop_last=True,
        seed=config.seed,
        bf16=bf16,
        use_cpu=device == "cpu",
        ddp_backend="gloo" if world > 1 and device == "cpu" else None,
        save_strategy="steps" if config.checkpoint_every else "no",
        save_steps=config.checkpoint_every or config.steps,
        save_total_limit=2,
        logging_steps=1,
        report_to="none",
        disable_tqdm=True,
    )


def _save_model(trainer, out: Path, summary: dict) -> None:
    """Write ``out/model`` (through a temporary name) and ``out/train_summary.json``; drop an empty
    checkpoints folder."""
    final, tmp, ckpts = out / "model", out / ".model.tmp", out / "checkpoints"
    shutil.rmtree(tmp, ignore_errors=True)
    trainer.save_model(str(tmp))
    (tmp / "training_args.bin").unlink(
        missing_ok=True
    )  # a pickle of the trainer's arguments; train_summary.json has them
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    if ckpts.is_dir() and not any(ckpts.iterdir()):
        ckpts.rmdir()  # no checkpoint was asked for
    (out / "train_summary.json").write_text(json.dumps(summary, indent=2, default=str))


def check_distributed(nproc: int, device: str | None = None) -> str:
    """The torch.distributed backend that ``nproc`` processes on ``device`` would use (gloo on the
    CPU, nccl on CUDA); an InputError naming what is missing when this machine cannot run them."""
    import torch.distributed as dist

    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise InputError(f"--nproc must be a positive whole number of processes, got {nproc!r}")
    if not dist.is_available():
        raise InputError(f"--nproc {nproc}: this torch build has no torch.distributed; run without --nproc")
    dev = pick_device(device)
    if dev.startswith("cuda"):
        if not dist.is_nccl_available():
            raise InputError(
                f"--nproc {nproc} on CUDA needs torch.distributed's nccl backend, which this torch build lacks; "
                "run without --nproc or with --device cpu"
            )
        if torch.cuda.device_count() < nproc:
            raise InputError(
                f"--nproc {nproc} on CUDA needs {nproc} GPUs; this machine has {torch.cuda.device_count()}"
            )
        return "nccl"
    if not dist.is_gloo_available():
        raise InputError(
            f"--nproc {nproc} on the CPU needs torch.distributed's gloo backend, which this torch build lacks; "
            "run without --nproc"
        )
    return "gloo"
