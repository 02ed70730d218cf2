"""Shared machinery of the learned maps (GeoPres, autoencoder): collecting a training sample from
batches, the split, and the torch training loop with AdamW, linear warm-up/decay and early
stopping on a validation split. torch is imported only inside :func:`train`, never at import."""

from __future__ import annotations

import math
import time
from typing import Any

from dataclasses import replace

import numpy as np

from .._parallel import idle_cores
from .._util import check_positive_int, pick_device, require
from ..base import Compressor, check_dim, make_rng
from ..errors import InputError
from ..specs import FitTags
from ._sample import reservoir

MIN_ROWS = 20


class LearnedMap(Compressor):
    """Base of compressors trained with torch. Subclasses build the model and the loss."""

    _positional = "dim"
    _state_scalars = ("history_", "best_step_", "device_used_")

    @property
    def fit_tags(self) -> FitTags:  # a uniform sample of max_rows rows
        return replace(super().fit_tags, min_rows=MIN_ROWS, sample=self.max_rows)

    def _validate_common(self, n_features: int) -> None:
        check_dim("dim", self.dim, n_features, allow_equal=False)
        make_rng(self.seed)
        for name in ("lr", "weight_decay"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or v < 0 or (name == "lr" and v == 0):
                raise InputError(f"{name} must be a positive number, got {v!r}")
        for name in ("epochs", "patience", "max_rows", "min_steps"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("batch_size", self.batch_size, minimum=2, allow_none=True)
        if not 0 < self.val_fraction < 1:
            raise InputError(f"val_fraction must be in (0, 1), got {self.val_fraction!r}")
        if not 0 <= self.warmup < 1:
            raise InputError(f"warmup must be a fraction in [0, 1), got {self.warmup!r}")

    def _make_model(self, torch, n_features: int):
        raise NotImplementedError

    def _loss(self, torch, model, batch):
        raise NotImplementedError

    def _export(self, model) -> None:
        raise NotImplementedError

    def _fit(self, batches, n_features: int) -> None:
        rng = make_rng(self.seed)
        X = reservoir(batches, self.max_rows, rng)
        perm = rng.permutation(len(X))
        n_val = max(2, int(round(self.val_fraction * len(X))))
        train_rows, val_rows = X[perm[n_val:]], X[perm[:n_val]]
        model, history, best_step, device = train(self, train_rows, val_rows, rng)
        self._export(model)
        self.history_ = history
        self.best_step_ = best_step
        self.device_used_ = device


def train(comp: LearnedMap, train_rows: np.ndarray, val_rows: np.ndarray, rng: np.random.Generator):
    """AdamW, linear warm-up then linear decay to 0, about 20 evaluations of the validation loss
    over the run, early stopping after ``patience`` evaluations past the warm-up without
    improvement; the best model is restored."""
    torch = require("torch", "learned", f"fitting {comp.name}")  # heavy: imported on fit, never by `import embcompress`

    device = pick_device(comp.device)
    # the paper's 20,000 on a GPU; on a CPU each step costs O(batch^2) elementwise work (about
    # 1 s at 4,096 rows on 2 cores, 0.25 s at 2,048), so the default there is 2,048
    batch = comp.batch_size or (20_000 if device.startswith("cuda") else 2048)
    batch = min(batch, len(train_rows))
    steps_per_epoch = max(1, math.ceil(len(train_rows) / batch))
    epochs = max(comp.epochs, math.ceil(comp.min_steps / steps_per_epoch))
    threads = torch.get_num_threads()
    idle = idle_cores() if device == "cpu" and threads > 1 else None
    try:
        # torch's OpenMP team spins at its barriers: on a core another job uses, it runs at that
        # job's pace, so the team is held to the idle cores. The model can depend on it in the last
        # bits: some shapes round the same on 1 thread as on 2 (a test checks one GeoPres case),
        # others not (400 x 48 at batch 64: 5e-7 apart), so a fit beside a busy core may differ
        # that much from one on a quiet machine
        torch.set_num_threads(min(threads, idle or threads))
        with torch.random.fork_rng(devices=[]):  # the seed decides initialization and sampling; global state untouched
            torch.manual_seed(int(comp.seed))
            if device.startswith("cuda"):
                torch.cuda.manual_seed_all(int(comp.seed))
            return _loop(torch, comp, train_rows, val_rows, rng, device, batch, steps_per_epoch, epochs)
    finally:
        torch.set_num_threads(threads)


def _loop(torch, comp, train_rows, val_rows, rng, device, batch, steps_per_epoch, epochs):
    total = epochs * steps_per_epoch
    warm = int(round(comp.warmup * total))
    eval_every = max(1, steps_per_epoch // 2, total // 20)  # about 20 evaluations over the run
    model = comp._make_model(torch, train_rows.shape[1]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=comp.lr, weight_decay=comp.weight_decay)

    def lr_at(step: int) -> float:  # linear warm-up, then linear decay to 0 (step counts from 0)
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total - step) / max(1, total - warm))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    Xtr = torch.from_numpy(train_rows).to(device)
    Xval = torch.from_numpy(val_rows[: max(batch, 2)]).to(device)
    best = (math.inf, 0, {k: v.detach().clone() for k, v in model.state_dict().items()})
    history: list[dict[str, Any]] = []
    bad_evals = 0
    t0 = time.perf_counter()
    step = 0
    stop = False
    for epoch in range(epochs):
        order = torch.from_numpy(rng.permutation(len(train_rows))).to(device)
        for s in range(steps_per_epoch):
            idx = order[s * batch : (s + 1) * batch]
            if len(idx) < 2:
                continue
            model.train()
            loss = comp._loss(torch, model, Xtr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if step % eval_every == 0 or step == total:
                model.eval()
                with torch.no_grad():
                    val = float(comp._loss(torch, model, Xval))
                history.append({"step": step, "epoch": epoch, "train_loss": float(loss.detach()), "val_loss": val,
                                "seconds": round(time.perf_counter() - t0, 3)})
                if not math.isfinite(val):
                    raise InputError(f"{comp.name} training diverged (validation loss {val}); lower lr (now {comp.lr})")
                if val < best[0]:
                    best = (val, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
                    bad_evals = 0
                elif step > warm:  # patience counts only once the warm-up is over
                    bad_evals += 1
                    if bad_evals >= comp.patience:
                        stop = True
                        break
        if stop:
            break
    model.load_state_dict(best[2])
    return model.cpu(), history, best[1], device
