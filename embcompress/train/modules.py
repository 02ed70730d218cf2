"""The temperature losses as sentence-transformers loss modules.

Each module is ``Loss(model, ...)`` with ``forward(sentence_features, labels)``, the interface of
sentence-transformers' losses, so it drops into a user's own ``SentenceTransformerTrainer`` script:

    loss = TempAggLoss(model, taus=(0.03, 0.06, 0.1))
    SentenceTransformerTrainer(model=model, args=args, train_dataset=pairs, loss=loss).train()

Columns are (anchor, positive, negative_1, ..., negative_H); every column after the second is one
hard negative per anchor. The arithmetic lives in :mod:`.losses` (pure tensor functions); a module
embeds the columns, optionally gathers them from every process, and calls the function.

* ``gather_across_devices=True`` (set by :func:`embcompress.train.train` when it runs under
  ``torchrun``): every process's embeddings are gathered, so the in-batch negatives span the global
  batch and the loss equals the one-process loss on the same global batch; the gradients flowing
  back to the other processes' embeddings are summed where they were computed.
* :class:`GradCacheLoss` wraps any of these modules with gradient caching (Gao et al., 2021,
  "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup"): a global batch of
  4,096 in the memory of one mini-batch. Its loss and gradients equal the wrapped module's.
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import partial
from typing import Any, Iterable, Mapping, Sequence

import torch
from torch import Tensor, nn

from ..core._util import check_positive_int
from . import losses


def model_width(model) -> int | None:
    """The embedding width of a sentence-transformers model (its method was renamed in v6)."""
    get = getattr(model, "get_embedding_dimension", None) or getattr(model, "get_sentence_embedding_dimension", None)
    return get() if get is not None else None


class _GatherWithGrad(torch.autograd.Function):
    """All-gather along the batch; backward sums every process's gradient for the local rows."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        import torch.distributed as dist

        world, rank = dist.get_world_size(), dist.get_rank()
        sizes = [torch.zeros(1, dtype=torch.long, device=x.device) for _ in range(world)]
        dist.all_gather(sizes, torch.tensor([x.shape[0]], device=x.device))
        if len({int(s) for s in sizes}) != 1:
            raise RuntimeError(
                f"processes hold different batch sizes {[int(s) for s in sizes]}; gathering needs equal ones"
            )
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x.contiguous())
        ctx.rows = (rank * x.shape[0], (rank + 1) * x.shape[0])
        return torch.cat(parts)  # (world * B, d)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        import torch.distributed as dist

        grad = grad.contiguous()
        dist.all_reduce(grad)  # every process computed d loss / d (all rows); sum them
        return grad[ctx.rows[0] : ctx.rows[1]]


def gather_across_processes(x: Tensor) -> Tensor:
    """``x`` from every process, concatenated in rank order, with gradients; ``x`` itself outside
    a distributed run."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return x
    return _GatherWithGrad.apply(x)


class TemperatureLoss(nn.Module):
    """Base of the loss modules: embed the columns, gather them if asked, apply :meth:`compute`."""

    def __init__(self, model, *, gather_across_devices: bool = False) -> None:
        super().__init__()
        self.model = model
        self.gather_across_devices = bool(gather_across_devices)

    def compute(self, anchor: Tensor, positive: Tensor, negatives: Tensor | None) -> Tensor:
        raise NotImplementedError

    def embed(self, feature: Mapping[str, Any]) -> Tensor:
        return self.model(feature)["sentence_embedding"]

    def loss_from_embeddings(self, reps: Sequence[Tensor]) -> Tensor:
        """The loss of one batch from its column embeddings [(B, d), (B, d), (B, d) x H]."""
        if len(reps) < 2:
            raise ValueError(
                f"a contrastive loss needs (anchor, positive[, negatives]) columns, got {len(reps)} column(s)"
            )
        if self.gather_across_devices:
            reps = [gather_across_processes(r) for r in reps]
        a, p, *neg = (
            r.float() if r.dtype in (torch.float16, torch.bfloat16) else r for r in reps
        )  # the loss in >= float32
        n = torch.stack(neg, dim=1) if neg else None  # (B, H, d)
        return self.compute(a, p, n)

    def forward(self, sentence_features: Iterable[Mapping[str, Any]], labels: Tensor | None = None) -> Tensor:
        return self.loss_from_embeddings([self.embed(f) for f in sentence_features])

    def get_config_dict(self) -> dict[str, Any]:  # shown in sentence-transformers' model cards
        return {}

    @property
    def citation(self) -> str:
        return (
            "Dinu et al. (2025), temperature and compression of text embeddings; "
            "see embcompress.train.losses for the equations."
        )


class InfoNCELoss(TemperatureLoss):
    """InfoNCE with cosine similarity at temperature ``tau`` (eq. 1); ``negative_weight_beta`` > 0
    weights the negatives by their similarity to the anchor."""

    def __init__(
        self, model, tau: float = 0.05, *, negative_weight_beta: float = 0.0, gather_across_devices: bool = False
    ) -> None:
        super().__init__(model, gather_across_devices=gather_across_devices)
        self.tau = losses.check_tau(tau)
        self.negative_weight_beta = float(negative_weight_beta)

    def compute(self, a, p, n):
        return losses.info_nce(a, p, n, tau=self.tau, negative_weight_beta=self.negative_weight_beta)

    def get_config_dict(self):
        return {"tau": self.tau, "negative_weight_beta": self.negative_weight_beta}


class TempAggLoss(TemperatureLoss):
    """Temperature aggregation (eq. 6): sum_t w_t InfoNCE(tau_t)."""

    def __init__(
        self,
        model,
        taus: Sequence[float] = (0.03, 0.06, 0.1),
        weights: Sequence[float] | None = None,
        *,
        negative_weight_beta: float = 0.0,
        gather_across_devices: bool = False,
    ) -> None:
        super().__init__(model, gather_across_devices=gather_across_devices)
        self.taus = [losses.check_tau(t) for t in taus]
        if not self.taus:
            raise losses.InputError("TempAgg needs at least one temperature")
        self.weights = list(weights) if weights is not None else None
        self.negative_weight_beta = float(negative_weight_beta)

    def compute(self, a, p, n):
        return losses.temp_agg(
            a, p, n, taus=self.taus, weights=self.weights, negative_weight_beta=self.negative_weight_beta
        )

    def get_config_dict(self):
        return {"taus": self.taus, "weights": self.weights, "negative_weight_beta": self.negative_weight_beta}


def _check_widths(model, dims: Sequence[int]) -> list[int]:
    return losses.check_dims(list(dims), model_width(model))


class MatryoshkaInfoNCELoss(TemperatureLoss):
    """Matryoshka InfoNCE (eq. 5): sum_i lambda_i InfoNCE(f[:d_i], tau)."""

    def __init__(
        self,
        model,
        dims: Sequence[int],
        weights: Sequence[float] | None = None,
        *,
        tau: float = 0.05,
        negative_weight_beta: float = 0.0,
        gather_across_devices: bool = False,
    ) -> None:
        super().__init__(model, gather_across_devices=gather_across_devices)
        self.dims = _check_widths(model, dims)
        self.weights = list(weights) if weights is not None else None
        self.tau = losses.check_tau(tau)
        self.negative_weight_beta = float(negative_weight_beta)

    def compute(self, a, p, n):
        return losses.mrl(
            losses.info_nce,
            a,
            p,
            n,
            dims=self.dims,
            weights=self.weights,
            tau=self.tau,
            negative_weight_beta=self.negative_weight_beta,
        )

    def get_config_dict(self):
        return {
            "dims": self.dims,
            "weights": self.weights,
            "tau": self.tau,
            "negative_weight_beta": self.negative_weight_beta,
        }


class TempAggMRLLoss(TemperatureLoss):
    """TempAggMRL (eq. 7): TempAgg at every Matryoshka width."""

    def __init__(
        self,
        model,
        dims: Sequence[int],
        taus: Sequence[float] = (0.03, 0.06, 0.1),
        *,
        dim_weights: Sequence[float] | None = None,
        tau_weights: Sequence[float] | None = None,
        negative_weight_beta: float = 0.0,
        gather_across_devices: bool = False,
    ) -> None:
        super().__init__(model, gather_across_devices=gather_across_devices)
        self.dims = _check_widths(model, dims)
        self.taus = [losses.check_tau(t) for t in taus]
        self.dim_weights = list(dim_weights) if dim_weights is not None else None
        self.tau_weights = list(tau_weights) if tau_weights is not None else None
        self.negative_weight_beta = float(negative_weight_beta)

    def compute(self, a, p, n):
        return losses.temp_agg_mrl(
            a,
            p,
            n,
            dims=self.dims,
            taus=self.taus,
            dim_weights=self.dim_weights,
            tau_weights=self.tau_weights,
            negative_weight_beta=self.negative_weight_beta,
        )

    def get_config_dict(self):
        return {"dims": self.dims, "taus": self.taus, "negative_weight_beta": self.negative_weight_beta}


class TempSpecMRLLoss(TemperatureLoss):
    """TempSpecMRL (eq. 8): InfoNCE at width d_i with its own tau_i, e.g. {96: 0.03, 192: 0.06, 384: 0.1}."""

    def __init__(
        self,
        model,
        tau_by_dim: Mapping[int, float],
        weights: Sequence[float] | None = None,
        *,
        negative_weight_beta: float = 0.0,
        gather_across_devices: bool = False,
    ) -> None:
        super().__init__(model, gather_across_devices=gather_across_devices)
        if not tau_by_dim:
            raise losses.InputError("TempSpecMRL needs a {width: tau} mapping")
        _check_widths(model, list(tau_by_dim))
        self.tau_by_dim = {int(d): losses.check_tau(t) for d, t in tau_by_dim.items()}
        self.weights = list(weights) if weights is not None else None
        self.negative_weight_beta = float(negative_weight_beta)

    def compute(self, a, p, n):
        return losses.temp_spec_mrl(
            a, p, n, tau_by_dim=self.tau_by_dim, weights=self.weights, negative_weight_beta=self.negative_weight_beta
        )

    def get_config_dict(self):
        return {"tau_by_dim": self.tau_by_dim, "negative_weight_beta": self.negative_weight_beta}


class _RngState:
    """The CPU (and CUDA device) random state at one moment, to replay dropout masks exactly."""

    def __init__(self, device: torch.device) -> None:
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        self.device = device

    def replay(self):
        fork = torch.random.fork_rng(devices=[self.device] if self.cuda is not None else [])
        fork.__enter__()
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)
        return fork


def _slice(feature: Mapping[str, Any], begin: int, end: int) -> dict[str, Any]:
    """Rows begin:end of a tokenized column; padding columns no row of the slice uses are dropped."""
    mask = feature.get("attention_mask")
    width = None
    if isinstance(mask, Tensor) and mask.ndim == 2:
        used = mask[begin:end].bool().any(dim=0).nonzero()
        if len(used):
            width = int(used.max()) + 1
    out = {}
    for k, v in feature.items():
        if isinstance(v, Tensor) and v.ndim >= 1:
            v = v[begin:end]
            if width is not None and v.ndim >= 2 and mask is not None and v.shape[1] == mask.shape[1]:
                v = v[:, :width]
        out[k] = v
    return out


def _rows(feature: Mapping[str, Any]) -> int:
    for key in ("input_ids", "attention_mask"):
        if isinstance(feature.get(key), Tensor):
            return feature[key].shape[0]
    return next(v.shape[0] for v in feature.values() if isinstance(v, Tensor) and v.ndim)


class GradCacheLoss(nn.Module):
    """Gradient caching around a :class:`TemperatureLoss`: a large batch in bounded memory.

    1. Every column is embedded in mini-batches of ``mini_batch_size`` without a graph; the random
       state before each mini-batch is kept.
    2. The loss is computed on those embeddings and differentiated down to them (cheap: B x d).
    3. When the trainer calls ``backward``, each mini-batch is embedded again, under the same random
       state (same dropout masks), and its cached embedding gradient is pushed into the model.

    Only one mini-batch's activations are alive at a time, so memory is that of ``mini_batch_size``
    whatever the batch; the cost is one more forward pass. Under DistributedDataParallel the
    gradients are synchronized once, on the last mini-batch."""

    def __init__(self, loss: TemperatureLoss, mini_batch_size: int = 32) -> None:
        super().__init__()
        if not isinstance(loss, TemperatureLoss):
            raise TypeError(f"GradCacheLoss wraps an embcompress loss module, got {type(loss).__name__}")
        self.loss = loss
        self.mini_batch_size = check_positive_int("mini_batch_size", mini_batch_size)

    @property
    def model(self):
        return self.loss.model

    def get_config_dict(self) -> dict[str, Any]:
        return {**self.loss.get_config_dict(), "mini_batch_size": self.mini_batch_size}

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def forward(self, sentence_features: Iterable[Mapping[str, Any]], labels: Tensor | None = None) -> Tensor:
        features = list(sentence_features)
        if not torch.is_grad_enabled():  # evaluation: the plain loss, mini-batched
            with torch.no_grad():
                return self.loss.loss_from_embeddings([self._embed_all(f)[0] for f in features])
        device = self._device()
        reps, states = [], []
        for f in features:
            r, s = self._embed_all(f, device)
            reps.append(r.requires_grad_())
            states.append(s)
        loss = self.loss.loss_from_embeddings(reps)
        loss.backward()  # down to the embeddings only: they are leaves
        grads = [r.grad for r in reps]
        out = loss.detach().requires_grad_()
        out.register_hook(partial(self._replay, features, grads, states))
        return out

    def _embed_all(self, feature, device=None) -> tuple[Tensor, list[_RngState]]:
        n, mb = _rows(feature), self.mini_batch_size
        reps, states = [], []
        with torch.no_grad():
            for b in range(0, n, mb):
                if device is not None:
                    states.append(_RngState(device))
                reps.append(self.loss.embed(_slice(feature, b, b + mb)).detach())
        return torch.cat(reps), states

    def _replay(self, features, grads, states, grad_output: Tensor) -> None:
        model = self.model
        jobs = [
            (f, g, b, st)
            for f, g, s in zip(features, grads, states)
            for b, st in zip(range(0, _rows(f), self.mini_batch_size), s)
        ]
        no_sync = getattr(model, "no_sync", None)  # DistributedDataParallel: synchronize once, at the end
        for i, (f, g, b, st) in enumerate(jobs):
            last = i == len(jobs) - 1
            with nullcontext() if last or no_sync is None else no_sync():
                fork = st.replay()
                try:
                    with torch.enable_grad():  # backward hooks run with gradients off
                        emb = self.loss.embed(_slice(f, b, b + self.mini_batch_size))
                        surrogate = (emb.to(g.dtype) * (g[b : b + emb.shape[0]] * grad_output)).sum()
                finally:
                    fork.__exit__(None, None, None)
                surrogate.backward()
