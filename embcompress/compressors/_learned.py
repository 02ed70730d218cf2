"""Shared machinery of the learned maps (GeoPres, autoencoder): collecting a training sample from
batches, the split, and the torch training loop with AdamW, linear warm-up/decay and early
stopping on a validation split. torch is imported only inside :func:`train`, never at import."""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple, Sequence


import numpy as np

from ..core._parallel import idle_cores
from ..core._util import check_positive_int, pick_device, require
from ..core.base import Compressor, check_fit
from ..core.checks import check_array, check_dim, make_rng
from ..core.errors import InputError
from ..core.specs import Traits
from ._sample import reservoir

MIN_ROWS = 20


class LearnedMap(Compressor):
    """Base of compressors trained with torch. Subclasses build the model and the loss."""

    _positional = "dim"
    _state_scalars = ("history_", "best_step_", "device_used_")

    @property
    def traits(self) -> Traits:  # a uniform sample of max_rows rows
        return super().traits.with_fit(min_rows=MIN_ROWS, sample=self.max_rows)

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

    def _target(self, torch, Y):
        """What the loss compares a batch's image with, computed from the batch alone (no
        gradient): the same for every map of :meth:`joint_fit_key` on the same batch. None: the
        loss needs none."""
        return None

    def _loss(self, torch, model, Y, target):
        raise NotImplementedError

    def _export(self, model) -> None:
        raise NotImplementedError

    def joint_fit_key(self):
        """Maps with equal keys fitted on the same rows train on the same batches, and can share
        each batch's :meth:`_target` (:func:`fit_together`): the class and every parameter but
        ``dim``. None for a loss that draws random numbers while it trains (they would interleave)."""
        params = self.get_params(deep=False)
        params.pop("dim")
        return type(self), tuple(sorted((k, repr(v)) for k, v in params.items()))

    def _fit(self, batches, n_features: int) -> None:
        self._take(*train([self], *_split(self, batches))[0])

    def _take(self, model, history, best_step, device) -> None:
        self._export(model)
        self.history_ = history
        self.best_step_ = best_step
        self.device_used_ = device


def _split(comp: LearnedMap, batches):
    """(training rows, validation rows, rng) of a fit's sample of ``batches``: the sample, the
    split and then the batches' order drawn from one generator of the map's seed."""
    rng = make_rng(comp.seed)
    X = reservoir(batches, comp.max_rows, rng)
    perm = rng.permutation(len(X))
    n_val = max(2, int(round(comp.val_fraction * len(X))))
    return X[perm[n_val:]], X[perm[:n_val]], rng


def fit_together(comps: Sequence[LearnedMap], X: np.ndarray) -> None:
    """Fit maps of one :meth:`~LearnedMap.joint_fit_key` (GeoPres at several widths) on the same
    rows ``X``, each to the model it gets when fitted alone: the same sample, split, batches and
    initialization. They train side by side, so each batch's target (GeoPres' distance matrix,
    about 40% of a step at 2,048 rows on a CPU) is computed once for all of them."""
    keys = {c.joint_fit_key() for c in comps}
    if len(comps) < 2 or len(keys) != 1 or None in keys:
        raise InputError(
            "fit_together takes two or more maps of one joint_fit_key (the same kind and settings but dim)"
        )
    X = check_array(X, what="input")
    for c in comps:  # every map's checks of a fit, before any training
        check_fit(c, X.shape[1], lambda need: len(X))
    results = train(comps, *_split(comps[0], lambda: iter([X])))
    for c, (model, history, best_step, device) in zip(comps, results):
        c._fitted(X.shape[1], lambda n, c=c, r=(model, history, best_step, device): c._take(*r))


def train(comps: Sequence[LearnedMap], train_rows: np.ndarray, val_rows: np.ndarray, rng: np.random.Generator):
    """AdamW, linear warm-up then linear decay to 0, about 20 evaluations of the validation loss
    over the run, early stopping after ``patience`` evaluations past the warm-up without
    improvement; the best model is restored. Several maps of one :meth:`~LearnedMap.joint_fit_key`
    train side by side on the same batches (:func:`fit_together`). Returns one (model, history,
    best step, device) per map; a history's ``seconds`` count from the start of the training,
    the other maps' steps included."""
    torch = require(
        "torch", "learned", f"fitting {comps[0].name}"
    )  # heavy: imported on fit, never by `import embcompress`

    comp = comps[0]
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
            runs = []
            for c in comps:  # each initialized as if alone
                torch.manual_seed(int(c.seed))
                if device.startswith("cuda"):
                    torch.cuda.manual_seed_all(int(c.seed))
                runs.append(_Run(torch, c, train_rows.shape[1], device))
            out = _loop(torch, runs, (train_rows, val_rows), rng, device, _Steps(batch, steps_per_epoch, epochs))
    finally:
        torch.set_num_threads(threads)
    return out


class _Run:
    """One map's training: its model, optimizer, schedule, best state so far and history."""

    def __init__(self, torch, comp: LearnedMap, n_features: int, device: str):
        self.comp = comp
        self.model = comp._make_model(torch, n_features).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=comp.lr, weight_decay=comp.weight_decay)
        self.best = (math.inf, 0, self._state())
        self.history: list[dict[str, Any]] = []
        self.bad_evals = 0
        self.active = True
        self.loss = None

    def _state(self):
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def schedule(self, torch, total: int, warm: int) -> None:
        def lr_at(step: int) -> float:  # linear warm-up, then linear decay to 0 (step counts from 0)
            if step < warm:
                return (step + 1) / warm
            return max(0.0, (total - step) / max(1, total - warm))

        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lr_at)

    def step(self, torch, Y, target) -> None:
        self.model.train()
        self.loss = self.comp._loss(torch, self.model, Y, target)
        self.opt.zero_grad(set_to_none=True)
        self.loss.backward()
        self.opt.step()
        self.sched.step()

    def evaluate(self, torch, Xval, val_target, entry: dict[str, Any], warm: int) -> None:
        """Record the validation loss; keep the best state; stop after ``patience`` evaluations
        past the warm-up without improvement."""
        self.model.eval()
        threads = torch.get_num_threads()
        try:
            # on one thread: the loss is a float32 reduction that rounds differently on 1 and 2 threads (2.6e-7
            # apart), and the training's threads follow the idle cores, so the history and the best step would
            # depend on what else the machine ran (the maps, which do not, were equal to the last bit)
            torch.set_num_threads(1)
            with torch.no_grad():
                val = float(self.comp._loss(torch, self.model, Xval, val_target))
        finally:
            torch.set_num_threads(threads)
        self.history.append({**entry, "train_loss": float(self.loss.detach()), "val_loss": val})
        if not math.isfinite(val):
            raise InputError(
                f"{self.comp.name} training diverged (validation loss {val}); lower lr (now {self.comp.lr})"
            )
        if val < self.best[0]:
            self.best = (val, entry["step"], self._state())
            self.bad_evals = 0
        elif entry["step"] > warm:  # patience counts only once the warm-up is over
            self.bad_evals += 1
            self.active = self.bad_evals < self.comp.patience


class _Steps(NamedTuple):
    """A training's steps: rows per batch, steps per epoch, epochs."""

    batch: int
    per_epoch: int
    epochs: int


def _loop(torch, runs, rows: tuple[np.ndarray, np.ndarray], rng, device, steps: _Steps):
    """Train every run of ``runs`` on the same batches of ``rows = (training rows, validation rows)`` on
    ``device``, ``steps`` long, evaluating about 20 times. Returns, per run, its model with its best
    weights restored, its history, the step of the best weights and the device."""
    train_rows, val_rows = rows
    batch, steps_per_epoch, epochs = steps
    comp = runs[0].comp
    total = epochs * steps_per_epoch
    warm = int(round(comp.warmup * total))
    eval_every = max(1, steps_per_epoch // 2, total // 20)  # about 20 evaluations over the run
    for run in runs:
        run.schedule(torch, total, warm)
    Xtr = torch.from_numpy(train_rows).to(device)
    Xval = torch.from_numpy(val_rows[: max(batch, 2)]).to(device)
    with torch.no_grad():
        val_target = comp._target(torch, Xval)  # the validation rows are fixed: their target too
    t0 = time.perf_counter()
    step = 0
    for epoch in range(epochs):
        order = torch.from_numpy(rng.permutation(len(train_rows))).to(device)
        for s in range(steps_per_epoch):
            idx = order[s * batch : (s + 1) * batch]
            if len(idx) < 2:
                continue
            Y = Xtr[idx]
            with torch.no_grad():
                target = comp._target(torch, Y)  # one for every map training on this batch
            active = [run for run in runs if run.active]
            for run in active:
                run.step(torch, Y, target)
            step += 1
            if step % eval_every == 0 or step == total:
                entry = {"step": step, "epoch": epoch, "seconds": round(time.perf_counter() - t0, 3)}
                for run in active:
                    run.evaluate(torch, Xval, val_target, entry, warm)
            if not any(run.active for run in runs):
                break
        if not any(run.active for run in runs):
            break
    out = []
    for run in runs:
        run.model.load_state_dict(run.best[2])
        out.append((run.model.cpu(), run.history, run.best[1], device))
    return out
