"""``embed --backend onnx`` and ``onnx-int8``: the model's transformer run by ONNX Runtime.

The first use exports the transformer of a local sentence-transformers model (Transformer +
Pooling [+ Normalize]) to ONNX with torch, from its own weights, offline; BERT-like models get
ONNX Runtime's fused attention and layer-norm kernels; ``onnx-int8`` then quantizes the weight
matrices to int8, one scale per output channel (activations are quantized per batch at run time:
dynamic quantization, no calibration data). The export is checked against torch on a few texts
and cached (``EMBCOMPRESS_CACHE``, else ``$XDG_CACHE_HOME/embcompress`` or ``~/.cache/embcompress``)
under a key of the weights' bytes, the variant and the versions, so later runs need neither torch
nor sentence-transformers: a tokenizer, the ONNX session, and pooling in numpy.

What the faster backend changes: int8 weights move each embedding slightly (mean cosine to the
torch embedding about 0.99; ``benchmarks/training/bench_embed.py`` prints it with the speed); ``onnx`` in
float32 gives the torch embeddings up to float rounding. Only the CPU is used.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core._fs import atomic_dir
from ..core._util import require
from ..core.errors import InputError, OutputExistsError

BACKENDS = ("torch", "onnx", "onnx-int8")
EXPORT_VERSION = 1  # bump when the export below changes: older cache entries are then not used
POOLINGS = ("mean", "cls", "max")
FUSED_TYPES = ("bert", "roberta", "xlm-roberta", "camembert", "electra")  # ONNX Runtime's BERT fusion applies
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
CHECK_TEXTS = (
    "How do I install a package from a local file?",
    "Compression of sentence embeddings for retrieval.",
    "a",
    "The quick brown fox jumps over the lazy dog " * 12,
)
MIN_CHECK_COSINE = {"onnx": 0.9999, "onnx-int8": 0.97}  # per text, on CHECK_TEXTS, against torch


def cache_root() -> Path:
    env = os.environ.get("EMBCOMPRESS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "embcompress"


def check_backend(backend: str, device: str | None) -> None:
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend != "torch" and device not in (None, "auto", "cpu"):
        raise InputError(f"backend {backend!r} runs on the CPU only; drop --device {device} or use --backend torch")


def _weights(model_path: Path) -> Path:
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (model_path / name).exists():
            return model_path / name
    raise InputError(
        f"{model_path} holds no model.safetensors or pytorch_model.bin; the onnx backends export from them"
    )


def _structure(model_path: Path) -> tuple[Path, str, bool]:
    """(the transformer's directory, the pooling mode, whether a Normalize module follows) from
    modules.json; any other module (Dense, ...) is refused with what is supported."""
    try:
        modules = json.loads((model_path / "modules.json").read_text())
    except (OSError, ValueError):
        raise InputError(
            f"{model_path} has no readable modules.json; the onnx backends need a sentence-transformers "
            "model (Transformer + Pooling [+ Normalize])"
        ) from None
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or kinds[2:] not in ([], ["Normalize"]):
        raise InputError(
            f"the onnx backends run Transformer + Pooling [+ Normalize] models; {model_path} has "
            f"{' + '.join(kinds)}; use --backend torch"
        )
    try:
        cfg = json.loads((model_path / modules[1].get("path", "") / "config.json").read_text())
    except (OSError, ValueError):
        raise InputError(f"{model_path}: the Pooling module has no readable config.json") from None
    mode = cfg.get("pooling_mode")
    if mode is None:  # the older form: one boolean per mode
        on = [
            k[len("pooling_mode_") :].removesuffix("_token").removesuffix("_tokens")
            for k, v in cfg.items()
            if k.startswith("pooling_mode_") and v
        ]
        mode = on[0] if len(on) == 1 else "+".join(on)
    if mode not in POOLINGS:
        raise InputError(
            f"the onnx backends pool by {', '.join(POOLINGS)}; {model_path} pools by {mode!r}; use --backend torch"
        )
    return model_path / modules[0].get("path", ""), mode, kinds[2:] == ["Normalize"]


def _key(model_path: Path, backend: str) -> str:
    import onnxruntime

    h = hashlib.sha256()
    with open(_weights(model_path), "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    h.update(f"{backend} {EXPORT_VERSION} onnxruntime {onnxruntime.__version__}".encode())
    return h.hexdigest()[:20]


class OnnxEncoder:
    """A sentence-transformers-like ``encode`` over an ONNX Runtime session (see the module doc)."""

    def __init__(self, directory: Path, threads: int | None = None):
        ort = require("onnxruntime", "onnx", "the onnx embedding backends")
        transformers = require("transformers", "models", "the onnx embedding backends")
        self.meta = json.loads((directory / "meta.json").read_text())
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or len(os.sched_getaffinity(0))
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(directory / "model.onnx"), opts, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.max_seq_length = int(self.meta["max_length"])  # tokens per text, as sentence-transformers names it
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.meta["tokenizer"])

    def get_embedding_dimension(self) -> int:
        return int(self.meta["dim"])

    def _batch(self, texts: list[str], normalize: bool) -> np.ndarray:
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_seq_length, return_tensors="np")
        hidden = self.session.run(None, {k: enc[k].astype(np.int64) for k in self.inputs})[0]
        mask = enc["attention_mask"][..., None].astype(np.float32)
        mode = self.meta["pooling"]
        if mode == "mean":
            v = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        elif mode == "cls":
            v = hidden[:, 0]
        else:  # max over the real tokens
            v = np.where(mask > 0, hidden, -1e9).max(axis=1)
        if normalize or self.meta["normalize"]:
            v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return v.astype(np.float32, copy=False)

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        normalize_embeddings: bool = False,
        convert_to_numpy: bool = True,
        show_progress_bar: bool = False,
    ) -> np.ndarray:
        """Embeddings of ``texts`` in their order; batches of similar length (longest first), as
        sentence-transformers forms them, so little padding is computed."""
        texts = list(texts)
        out = np.empty((len(texts), self.get_embedding_dimension()), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            out[idx] = self._batch([texts[i] for i in idx], normalize_embeddings)
        return out


def _export(
    model_path: Path, structure: tuple[Path, str, bool], backend: str, directory: Path, load_torch: Callable[[], Any]
) -> dict:
    """Write model.onnx and meta.json of ``backend`` for the model at ``model_path`` (its
    :func:`_structure`; loaded with torch by ``load_torch``) into ``directory``."""
    torch = require("torch", "models", "exporting a model to ONNX")
    require("onnx", "onnx", "exporting a model to ONNX")
    tdir, pooling, normalize = structure
    st = load_torch()
    transformer = st[0]
    auto = transformer.auto_model.eval()
    if hasattr(auto, "set_attn_implementation"):
        auto.set_attn_implementation("eager")  # a plain attention graph, which ONNX Runtime fuses
    tok = transformer.tokenizer
    sample = tok(list(CHECK_TEXTS[:2]), padding=True, return_tensors="pt")
    names = [k for k in INPUTS if k in sample]

    class Hidden(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return self.model(**dict(zip(names, args))).last_hidden_state

    model_file = _write_graph(torch, Hidden(auto), sample, names, auto.config, backend, directory)
    os.replace(model_file, directory / "model.onnx")
    for leftover in directory.glob("*.onnx*"):
        if leftover.name != "model.onnx":
            leftover.unlink()
    ref = st.encode(list(CHECK_TEXTS), normalize_embeddings=True, convert_to_numpy=True)
    meta = {
        "backend": backend,
        "export_version": EXPORT_VERSION,
        "model": str(model_path),
        "tokenizer": str(tdir),
        "pooling": pooling,
        "normalize": normalize,
        "max_length": int(transformer.max_seq_length),
        "dim": int(ref.shape[1]),
        "torch": torch.__version__,
    }
    (directory / "meta.json").write_text(json.dumps(meta, indent=1))
    meta["check_cosine"] = _check_export(ref, directory, backend, model_path)
    (directory / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def _check_export(ref: np.ndarray, directory: Path, backend: str, model_path: Path) -> dict:
    """How close the export in ``directory`` encodes the check texts to torch's ``ref``; an InputError
    when it is too far for ``backend``."""
    got = OnnxEncoder(directory, threads=1).encode(list(CHECK_TEXTS), normalize_embeddings=True)
    cos = (ref * got).sum(axis=1)
    if cos.min() < MIN_CHECK_COSINE[backend]:
        raise InputError(
            f"the {backend} export of {model_path} moves embeddings too far from torch's "
            f"(cosine {cos.min():.4f} < {MIN_CHECK_COSINE[backend]} on a check text); use --backend torch"
        )
    return {"mean": float(cos.mean()), "min": float(cos.min()), "texts": len(CHECK_TEXTS)}


def _write_graph(torch, module, sample, names: list[str], cfg, backend: str, directory: Path) -> Path:
    """Export ``module`` (the transformer's hidden states) to ONNX, optimized for ``backend``; the path
    of the optimized graph."""
    import logging

    raw = directory / "raw.onnx"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer notes
        torch.onnx.export(
            module,
            tuple(sample[k] for k in names),
            str(raw),
            dynamo=False,
            opset_version=17,
            input_names=names,
            output_names=["hidden"],
            dynamic_axes={k: {0: "batch", 1: "tokens"} for k in [*names, "hidden"]},
        )
    quiet = logging.root.manager.disable
    logging.disable(logging.WARNING)  # the optimizer's and quantizer's advice on the root logger, for this block only
    try:
        model_file = _optimize(raw, cfg, backend, directory)
    finally:
        logging.disable(quiet)
    return model_file


def _optimize(raw: Path, cfg, backend: str, directory: Path) -> Path:
    """The exported graph with ONNX Runtime's fused BERT kernels (where the architecture has them)
    and, for ``onnx-int8``, int8 weights with one scale per output channel; only the matrices
    multiplied by weights are quantized (attention's products of activations stay float)."""
    model_file = raw
    if cfg.model_type in FUSED_TYPES:
        from onnxruntime.transformers.optimizer import optimize_model

        fused = optimize_model(
            str(raw), model_type="bert", num_heads=cfg.num_attention_heads, hidden_size=cfg.hidden_size
        )
        model_file = directory / "fused.onnx"
        fused.save_model_to_file(str(model_file))
    if backend == "onnx-int8":
        from onnx import TensorProto
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantized = directory / "int8.onnx"
        quantize_dynamic(
            str(model_file),
            str(quantized),
            weight_type=QuantType.QInt8,
            per_channel=True,
            extra_options={"MatMulConstBOnly": True, "DefaultTensorType": TensorProto.FLOAT},
        )
        model_file = quantized
    return model_file


def onnx_encoder(
    model_path: str | os.PathLike, backend: str, load_torch: Callable[[], Any], threads: int | None = None
) -> OnnxEncoder:
    """The cached export of ``backend`` for the local model at ``model_path``, made on first use
    from the sentence-transformers model ``load_torch()`` returns (on the CPU)."""
    require("onnxruntime", "onnx", "the onnx embedding backends")
    model_path = Path(model_path)
    structure = _structure(model_path)
    directory = cache_root() / "onnx" / _key(model_path, backend)
    if not (directory / "meta.json").exists():
        try:
            with atomic_dir(directory) as tmp:
                _export(model_path, structure, backend, tmp, load_torch)
        except OutputExistsError:  # another process finished the same export first: keep theirs
            if not (directory / "meta.json").exists():
                raise
    return OnnxEncoder(directory, threads)
