"""train, temperature-study."""

from __future__ import annotations

from dataclasses import dataclass
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ._common import JsonOpt, OverwriteOpt, emit, err, guarded, kv_table, out, progress_bar, split_list, takes


def _floats(text: Optional[str], what: str) -> Optional[list[float]]:
    return split_list(text, float, what)


def _tau_by_dim(text: Optional[str]) -> Optional[dict[int, float]]:
    if not text:
        return None
    try:
        return {int(k): float(v) for k, v in (item.split(":") for item in text.split(",") if item.strip())}
    except ValueError:
        raise typer.BadParameter(f"--tau-by-dim must look like 96:0.03,192:0.06,384:0.1, got {text!r}") from None


def _without_nproc(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            out.append(a)
    return out


#: how long torchrun has to stop its workers after SIGTERM before its process group is killed; longer than
#: the 30 s torchrun gives them itself, so that it is torchrun that stops them when it can
STOP_SECONDS = 45


def _relaunch(nproc: int, pairs, cfg, out_dir: Path, overwrite: bool) -> int:
    """Run this very command under torchrun on ``nproc`` processes, once the cheap checks pass
    (backend, data and batch split, output); returns its exit code."""
    from embcompress.core._fs import check_output_dir
    from embcompress.train.trainer import check_distributed, make_sampler

    check_distributed(nproc, cfg.device)
    make_sampler(pairs, cfg, nproc)
    check_output_dir(out_dir, overwrite=overwrite)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "embcompress.cli",
        *_without_nproc(sys.argv[1:]),
    ]
    return _supervise(cmd)


def _supervise(cmd: list[str]) -> int:
    """Run torchrun's ``cmd`` to its end and return its exit code. On Ctrl-C or SIGTERM, torchrun is asked to stop
    its workers, then killed after :data:`STOP_SECONDS`, and any worker it leaves is killed too."""
    # torchrun in a process group of its own; it starts each worker in a session of its own (torch's
    # SubprocessHandler), so the workers are found by their parent, not by their group
    proc = subprocess.Popen(cmd, start_new_session=True)
    try:
        return proc.wait()
    except BaseException:  # Ctrl-C or SIGTERM: asked first, torchrun stops its workers before it exits ...
        workers = _descendants(proc.pid)
        proc.terminate()
        try:
            proc.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:  # ... then killed, with every worker still there: one stuck in a
            os.killpg(proc.pid, signal.SIGKILL)  # collective waits for the other as long as gloo lets it
            proc.wait()
        for pid in workers:  # whatever torchrun did not stop (an orphan kept this command's output open)
            _kill_group(pid)
        raise


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid``, from ``/proc`` (Linux; elsewhere none are found)."""
    parents: dict[int, list[int]] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
    for e in entries:
        try:
            with open(f"/proc/{e}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        parents.setdefault(ppid, []).append(int(e))
    found, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _kill_group(pid: int) -> None:
    """SIGKILL to the process group of ``pid`` (a worker leads its own), or to ``pid`` alone."""
    try:
        pgid = os.getpgid(pid)
        if pgid == pid:
            os.killpg(pgid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


app = typer.Typer()
ModelOpt = typer.Option(
    None, "--model", "-m", help="Local sentence-transformers model directory (default: packaged all-MiniLM-L6-v2)."
)


@dataclass(frozen=True)
class TrainRequest:
    """The options of ``train``."""

    data: Path = typer.Argument(
        ...,
        help="Pairs (.jsonl/.parquet with anchor, positive[, negative, source]) or, with --self-supervised, raw texts.",
    )
    out_dir: Path = typer.Argument(..., help="Output directory; the model is saved in OUT_DIR/model.")
    model: Optional[str] = ModelOpt
    loss: str = typer.Option("infonce", "--loss", help="infonce, tempagg, mrl, tempaggmrl or tempspecmrl.")
    tau: float = typer.Option(0.05, "--tau", help="InfoNCE temperature (infonce, mrl).")
    taus: Optional[str] = typer.Option(
        None, "--taus", help="Temperatures for tempagg/tempaggmrl (default 0.03,0.06,0.1)."
    )
    dims: Optional[str] = typer.Option(None, "--dims", help="Matryoshka widths for mrl/tempaggmrl (default d/4,d/2,d).")
    tau_by_dim: Optional[str] = typer.Option(
        None, "--tau-by-dim", help="TempSpecMRL widths and temperatures, e.g. 96:0.03,192:0.06,384:0.1."
    )
    negative_weight_beta: float = typer.Option(
        0.0, "--negative-weight-beta", help="Similarity-based weights on negatives (0: off)."
    )
    self_supervised: Optional[str] = typer.Option(
        None,
        "--self-supervised",
        help="Make pairs from raw texts: crop (two chunks of one document) or dropout (the same text twice).",
    )
    text_field: Optional[str] = typer.Option(
        None, "--text-field", help="Text field of raw texts (with --self-supervised)."
    )
    steps: int = typer.Option(300, "--steps", min=1)
    batch_size: int = typer.Option(32, "--batch-size", min=2, help="Global batch (split over the processes).")
    mini_batch_size: Optional[int] = typer.Option(
        None,
        "--mini-batch-size",
        min=1,
        help="Gradient caching: embed in mini-batches of this size, so a large --batch-size fits in memory.",
    )
    lr: float = typer.Option(2e-5, "--lr")
    freeze_layers: int = typer.Option(
        0,
        "--freeze-layers",
        min=0,
        help="Freeze the embeddings and the first N transformer layers (faster; the top layers still train).",
    )
    max_seq_length: int = typer.Option(128, "--max-seq-length", min=8)
    no_homogeneous: bool = typer.Option(False, "--no-homogeneous", help="Mix sources within a batch.")
    small_sources: str = typer.Option(
        "error",
        "--small-sources",
        help="Sources with fewer pairs than a batch: error, mix (pool them into one source) or drop.",
    )
    group_by_length: bool = typer.Option(
        False, "--group-by-length", help="Batches of similar text length within a source (less padding, faster on CPU)."
    )
    checkpoint_every: int = typer.Option(
        0, "--checkpoint-every", min=0, help="Save a resumable checkpoint every N steps."
    )
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in OUT_DIR/checkpoints.")
    nproc: int = typer.Option(
        1, "--nproc", min=1, help="Data-parallel processes on this machine (runs this command under torchrun)."
    )
    device: Optional[str] = typer.Option(None, "--device")
    seed: int = typer.Option(0, "--seed")
    overwrite: bool = OverwriteOpt
    json: bool = JsonOpt

    def config(self):
        """The training configuration these options ask for (validated by the caller)."""
        from embcompress.train import LossConfig, TrainConfig

        lc = LossConfig(
            kind=self.loss,
            tau=self.tau,
            taus=tuple(_floats(self.taus, "--taus") or (0.03, 0.06, 0.1)),
            dims=[int(d) for d in _floats(self.dims, "--dims")] if self.dims else None,
            tau_by_dim=_tau_by_dim(self.tau_by_dim),
            negative_weight_beta=self.negative_weight_beta,
        )
        cfg = TrainConfig(
            model=self.model,
            loss=lc,
            steps=self.steps,
            batch_size=self.batch_size,
            lr=self.lr,
            freeze_layers=self.freeze_layers,
            max_seq_length=self.max_seq_length,
            homogeneous=not self.no_homogeneous,
            small_sources=self.small_sources,
            group_by_length=self.group_by_length,
            mini_batch_size=self.mini_batch_size,
            checkpoint_every=self.checkpoint_every,
            seed=self.seed,
            device=self.device,
        )
        return cfg


@app.command()
@guarded
@takes(TrainRequest)
def train(req: TrainRequest) -> None:
    """Fine-tune a sentence-transformers model with temperature-controlled contrastive losses, on
    sentence-transformers' trainer. Multi-process: --nproc N, or torchrun --nproc_per_node N."""
    from embcompress.train import load_pairs
    from embcompress.train import train as run_train
    from embcompress.train.trainer import process_world

    cfg = req.config()
    cfg.validate()
    world, rank, _ = process_world()
    pairs = load_pairs(req.data, self_supervised=req.self_supervised, text_field=req.text_field, seed=req.seed)
    if req.nproc > 1 and world == 1:
        raise typer.Exit(_relaunch(req.nproc, pairs, cfg, req.out_dir, req.overwrite or req.resume))
    with progress_bar("training", req.steps, disable=rank != 0) as advance:
        res = run_train(
            pairs, req.out_dir, cfg, resume=req.resume, overwrite=req.overwrite, progress=lambda step, loss_: advance(1)
        )
    if rank != 0:
        return
    res.pop("config", None)
    emit(res, req.json, _trained_table(res, len(pairs), world))


def _trained_table(res: dict, pairs: int, world: int) -> Table:
    device = res["device"] + (" (bf16)" if res["bf16"] else "") + (f" x {world} processes" if world > 1 else "")
    return kv_table(
        f"trained {res['loss']} -> {res['output']}",
        {
            "pairs": f"{pairs:,}",
            "steps": res["steps"],
            "device": device,
            "loss": f"{res['first_loss']:.4f} -> {res['last_loss']:.4f}",
            "throughput": f"{res['pairs_per_second']:.1f} pairs/s",
            "time": f"{res['seconds']:.0f} s",
        },
    )


def _study_table(res: dict) -> Table:
    t = Table(
        title=f"{res['steps']} steps x batch {res['batch_size']}; {res['documents']:,} documents, {res['queries']:,} "
        "queries (held out)",
        title_justify="left",
    )
    keys = [k for k in res["rows"][-1] if k.startswith(("ndcg", "intrinsic", "retention"))] + ["pairs_per_second"]
    t.add_column("model")
    for k in keys:
        t.add_column(k.replace("retention_", "kept ").replace("_", " "), justify="right")
    for r in res["rows"]:
        t.add_row(
            r["model"],
            *[
                (
                    ""
                    if k not in r
                    else f"{r[k]:.0f}"
                    if k in ("intrinsic_dim",)
                    else f"{r[k]:.1f}"
                    if k == "pairs_per_second"
                    else f"{100 * r[k]:.1f}%"
                    if k.startswith("retention")
                    else f"{r[k]:.4f}"
                )
                for k in keys
            ],
        )
    return t


@dataclass(frozen=True)
class TemperatureStudyRequest:
    """The options of ``temperature_study``."""

    data: Path = typer.Argument(..., help="Training pairs (.jsonl/.parquet); must not contain the evaluation queries.")
    eval_dir: Path = typer.Argument(
        ..., help="Held-out retrieval set, BEIR layout (corpus.jsonl, queries.jsonl, qrels.tsv)."
    )
    out_dir: Path = typer.Argument(..., help="Directory for the trained models and study.json.")
    model: Optional[str] = ModelOpt
    taus: str = typer.Option("0.02,0.05,0.1,0.3", "--taus", help="One InfoNCE model per temperature.")
    tempagg: bool = typer.Option(True, "--tempagg/--no-tempagg", help="Also TempAgg over 0.03,0.06,0.1.")
    tempaggmrl: bool = typer.Option(False, "--tempaggmrl", help="Also TempAggMRL.")
    tempspecmrl: bool = typer.Option(False, "--tempspecmrl", help="Also TempSpecMRL.")
    steps: int = typer.Option(300, "--steps", min=1)
    batch_size: int = typer.Option(32, "--batch-size", min=2)
    mini_batch_size: Optional[int] = typer.Option(
        None, "--mini-batch-size", min=1, help="Gradient caching for large batches."
    )
    lr: float = typer.Option(2e-5, "--lr")
    max_seq_length: int = typer.Option(128, "--max-seq-length", min=8)
    freeze_layers: int = typer.Option(0, "--freeze-layers", min=0, help="Freeze the embeddings and the first N layers.")
    group_by_length: bool = typer.Option(
        False, "--group-by-length", help="Batches of similar text length (faster on CPU)."
    )
    small_sources: str = typer.Option(
        "error", "--small-sources", help="Sources with fewer pairs than a batch: error, mix or drop."
    )
    device: Optional[str] = typer.Option(None, "--device")
    seed: int = typer.Option(0, "--seed")
    overwrite: bool = OverwriteOpt
    json: bool = JsonOpt

    def losses(self):
        """One loss per temperature of --taus, then the aggregations asked for."""
        from embcompress.train import LossConfig

        losses = [LossConfig("infonce", tau=t) for t in _floats(self.taus, "--taus") or []]
        losses += [
            LossConfig(kind)
            for kind, on in (
                ("tempagg", self.tempagg),
                ("tempaggmrl", self.tempaggmrl),
                ("tempspecmrl", self.tempspecmrl),
            )
            if on
        ]
        return losses

    def base(self):
        """The training settings every model of the study shares."""
        from embcompress.train import TrainConfig

        return TrainConfig(
            model=self.model,
            steps=self.steps,
            batch_size=self.batch_size,
            lr=self.lr,
            max_seq_length=self.max_seq_length,
            mini_batch_size=self.mini_batch_size,
            freeze_layers=self.freeze_layers,
            group_by_length=self.group_by_length,
            small_sources=self.small_sources,
            seed=self.seed,
            device=self.device,
        )


@app.command("temperature-study")
@guarded
@takes(TemperatureStudyRequest)
def temperature_study(req: TemperatureStudyRequest) -> None:
    """Train one model per temperature (and aggregations) and compare quality and compressibility;
    writes OUT_DIR/study.json and the plot OUT_DIR/study.svg."""
    from embcompress.train.study import study_files

    res = study_files(
        req.data,
        req.eval_dir,
        req.out_dir,
        losses=req.losses(),
        base=req.base(),
        overwrite=req.overwrite,
        progress=lambda msg: err.print(f"[dim]{msg}[/dim]"),
    )
    if req.json:
        emit(res, True)
        return
    out.print(_study_table(res))
    out.print(f"plot: {req.out_dir / 'study.svg'}")
