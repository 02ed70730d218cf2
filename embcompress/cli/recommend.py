"""recommend: the code, or the serving plan, for a budget."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ._common import Bars, ColumnOpt, JsonOpt, OverwriteOpt, emit, guarded, out, takes

app = typer.Typer()


def _ranking_table(res: dict) -> Table:
    oos = res["fitted"] != "in-sample"
    how = (
        f"each code fitted on {res['fit_rows']:,} of them and scored on the others ({res['fitted']}), as most rows "
        "of a large file are new to its fit; ranked by that, in-sample beside"
        if oos
        else "in-sample"
    )
    t = Table(
        title=f"candidates within {res['budget_bytes']} bytes/vector, {res['metric']} on {res['sample']:,} vectors: "
        f"{how}",
        title_justify="left",
    )
    from embcompress.report.html import in_sample_queries

    fewer = in_sample_queries(res["ranking"])
    inside = f"retention (in-sample, {fewer:,} queries)" if fewer else "retention (in-sample)"
    kept = ["retention (unseen docs)", inside] if oos else ["retention (in-sample)"]
    notes = [
        f"too slow: {r['too_slow']}" if r["too_slow"] else (r.get("not_servable") or r.get("screened_out") or "")
        for r in res["ranking"]
    ]
    for c in (
        "",
        "configuration",
        "bytes/vector",
        "score",
        *kept,
        "fit s",
        "encode rows/s",
        "queries/s",
        *(["note"] if any(notes) else []),
    ):  # the note column only where a candidate has one
        t.add_column(c, justify="left" if c in ("", "configuration", "note") else "right")
    for i, (r, note) in enumerate(zip(res["ranking"], notes)):
        shares = [r["retention"], r["retention_in_sample"]][: len(kept)]
        t.add_row(
            "*" if r is res["winner"] else str(i + 1),
            r["label"],
            str(r["bytes_per_vector"]),
            f"{r['score']:.4f}",
            *["-" if v is None else f"{100 * v:.1f}%" for v in shares],
            f"{r['fit_seconds']:.1f}",
            f"{r['encode_rows_per_second']:,.0f}",
            f"{r['queries_per_second']:,.0f}",
            *([note] if any(notes) else []),
        )
    return t


def _recommend_notes(res: dict) -> None:
    """The lines between recommend's ranking and its winner: the sample, the queries, the screen, ties."""
    if res.get("sampled_from"):
        from embcompress.report.html import sampled_line

        out.print(sampled_line(res["sampled_from"]))
    if res.get("queries_note"):
        out.print(res["queries_note"])
    if res.get("screen"):
        sc = res["screen"]
        out.print(
            f"screened: {len(sc['first_round'])} candidates fitted on {sc['first_round_fit_rows']:,} rows first; "
            f"cut {', '.join(sc['cut'])}; the other {len(sc['kept'])} fitted on {res['fit_rows']:,} (without --screen "
            "every candidate is)"
        )
    if res.get("within_uncertainty"):
        out.print(
            f"within one standard error of the leader's label-free figure (a bootstrap over queries): "
            f"{', '.join(res['within_uncertainty'])}; judge a few queries to tell them apart"
        )


@dataclass(frozen=True)
class RecommendRequest:
    """The options of ``recommend``."""

    input: Path = typer.Argument(
        ...,
        help="Float embeddings (.parquet/.npy): the candidates are ranked on a sample, the winner is fitted on all.",
    )
    model_dir: Path = typer.Argument(
        ..., help="Directory to save the winning compressor in, ready for 'embcompress apply'."
    )
    budget: Optional[int] = typer.Option(
        None, "--budget", min=1, help="Bytes per vector you can afford (codes only, no original vectors)."
    )
    ram_budget: Optional[int] = typer.Option(
        None,
        "--ram-budget",
        min=1,
        help="Rank serving plans instead: bytes per vector of the first stage's codes in RAM. MODEL_DIR then receives "
        "the plan, ready for 'apply PLAN IN OUT' and 'search --plan'.",
    )
    disk_budget: Optional[int] = typer.Option(
        None,
        "--disk-budget",
        min=0,
        help="With --ram-budget: bytes per vector of the rescoring copy on disk (int8 = dims, float16 = 2 x dims, "
        "float32 = 4 x dims); 0: no copy. Default: any.",
    )
    max_latency_ms: Optional[float] = typer.Option(
        None,
        "--max-latency-ms",
        min=0.0,
        help="With --ram-budget: only plans answering one query within this many milliseconds on this machine (scaled "
        "to INPUT's rows) can win.",
    )
    k: int = typer.Option(
        10, "--k", min=1, help="With --ram-budget: results per query the plan serves (and scores, nDCG@k or recall@k)."
    )
    index: str = typer.Option(
        "exact",
        "--index",
        help="With --ram-budget: the first stage searched by exact scan, through an HNSW graph over the codes (bits or "
        "floats; its links, 272 B/vector, count in the RAM budget, and what it misses in the retention), or any.",
    )
    target: Optional[float] = typer.Option(
        None,
        "--target",
        min=0.0,
        max=1.0,
        help="Retention to reach, e.g. 0.95: the smallest candidate that reaches it wins.",
    )
    queries: Optional[Path] = typer.Option(
        None,
        "--queries",
        help="Float query embeddings (same model): with --qrels, rank by nDCG@10; without, against float search "
        "(--reference).",
    )
    qrels: Optional[Path] = typer.Option(None, "--qrels", help="BEIR qrels.tsv[.gz].")
    labels: Optional[str] = typer.Option(
        None, "--labels", help="Column of class labels in INPUT: rank by kNN accuracy."
    )
    sample: Optional[int] = typer.Option(
        None,
        "--sample",
        min=50,
        help="Rank on N documents: a seeded uniform sample across the whole file (default 20,000); with --qrels all by "
        "default, or the judged documents of a seeded sample of queries plus random others, N in all.",
    )
    reference: Optional[str] = typer.Option(
        None,
        "--reference",
        help="Without --qrels, how your queries are scored against float search: top1 (its top result as the relevant "
        "one), graded (its top 10, graded), recall (recall@10). Default: top1 for codes, graded for serving plans.",
    )
    folds: int = typer.Option(
        2, "--folds", min=1, help="Fit each candidate on all folds but one and score the one left out; 1: in-sample."
    )
    max_fit_seconds: Optional[float] = typer.Option(
        None,
        "--max-fit-seconds",
        min=0.001,
        help="Only candidates whose fit on the sample took at most this long can win.",
    )
    min_encode_rate: Optional[float] = typer.Option(
        None, "--min-encode-rate", min=1.0, help="Only candidates that encode at least this many rows/s can win."
    )
    serve: Optional[str] = typer.Option(
        None,
        "--serve",
        help="faiss, usearch or lancedb: only codes that target can hold (embcompress export --to) can win.",
    )
    screen: bool = typer.Option(
        False,
        "--screen/--no-screen",
        help="Two rounds (1.8x faster at 48 B on Debian): every candidate fitted on a quarter of the fit rows and "
        "scored on 1,000 queries, the best third on all. Not the default: it can cut a residual code that wins on all "
        "the rows.",
    )
    column: Optional[str] = ColumnOpt
    overwrite: bool = OverwriteOpt
    json: bool = JsonOpt

    def keywords(self) -> dict:
        """``recommend_files``' keyword arguments from these options."""
        return dict(
            target=self.target,
            queries=self.queries,
            qrels=self.qrels,
            labels=self.labels,
            sample=self.sample,
            column=self.column,
            reference=self.reference,
            folds=self.folds,
            max_fit_seconds=self.max_fit_seconds,
            min_encode_rate=self.min_encode_rate,
            serve=self.serve,
            screen=self.screen,
            overwrite=self.overwrite,
        )


@app.command()
@guarded
@takes(RecommendRequest)
def recommend(req: RecommendRequest) -> None:
    """Pick the code that keeps the most quality within a byte budget, on documents its fit did not
    see, on your own data, and save it; with --ram-budget, the serving plan (codes in RAM, a copy on disk)."""
    from embcompress.report.recommend import recommend_files

    if (req.budget is None) == (req.ram_budget is None):
        raise typer.BadParameter(
            "give --budget (codes only) or --ram-budget (a serving plan), one of them", param_hint="--budget"
        )
    if req.ram_budget is not None:
        return _recommend_plan(req)
    if req.index != "exact":
        raise typer.BadParameter(
            "--index chooses a serving plan's first stage: use it with --ram-budget", param_hint="--index"
        )

    with Bars() as bars:
        res = recommend_files(
            req.input,
            req.model_dir,
            req.budget,
            progress=bars.step,
            fit_progress=bars.stage("fitting the winner on all rows", None),
            **req.keywords(),
        )
    _show_recommend(res, req.input, req.model_dir, req.target, req.json)


def _show_recommend(res: dict, input, model_dir, target, as_json: bool) -> None:
    if as_json:
        emit(res, True)
        return
    out.print(_ranking_table(res))
    _recommend_notes(res)
    w = res["winner"]
    note = (
        ""
        if target is None
        else (
            " (reaches the target)"
            if res["target_reached"]
            else f" (no candidate reaches {100 * target:.1f}%; the best)"
        )
    )
    name = w["label"] if w["label"] == res["spec"] else f"{w['label']} = {res['spec']}"
    kept = (
        f"retention {100 * w['retention']:.1f}% on documents its fit did not see "
        f"({100 * w['retention_in_sample']:.1f}% in-sample)"
        if res["fitted"] != "in-sample"
        else f"retention {100 * w['retention']:.1f}% (in-sample)"
    )
    out.print(
        f"winner: {name}, {w['bytes_per_vector']} bytes/vector, {kept}{note}; fits {res['fit_rows']:,} rows in "
        f"{w['fit_seconds']:.1f} s, encodes {w['encode_rows_per_second']:,.0f} rows/s"
    )
    secs = res["seconds"]
    out.print(
        f"ranked in {secs['read_and_rank']:.1f} s (reading the sample included), the winner fitted on all rows in "
        f"{secs['fit_winner']:.1f} s"
    )
    est = res["apply_estimate"]
    line = f"applying it to the input's {est['rows']:,} rows takes about {_duration(est['seconds'])} at that rate"
    if est["faster"] and est["seconds"] >= 60:  # named where the wait is worth a choice
        f = est["faster"]
        line += (
            f"; {f['label']} keeps {100 * f['retention']:.1f}% and would take {_duration(f['seconds'])} "
            f"(--min-encode-rate rules slower codes out)"
        )
    out.print(line)
    out.print(
        f"saved to {model_dir}; compress with: embcompress apply {model_dir} {input} codes.parquet"
        + ("; search with --rerank asymmetric" if res["search"] == "asymmetric" else "")
    )


def _duration(seconds: float) -> str:
    """1.2 s, 45 s, 12 min, 3.4 h."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 600:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 6000 else f"{seconds / 3600:.1f} h"


def _winner_notes(res: dict) -> list[str]:
    """The lines under a plan ranking's winner: the code-only answer at the same RAM, and with a target, that the
    winner is the fastest of the plans reaching it at its RAM and disk."""
    w, c, target = res["winner"], res["code_only"], res.get("target")
    out = [f"codes only at {res['ram_budget']} B: {c['label']}, retention {100 * c['retention']:.1f}%"]
    if target is None or w["retention"] < target:
        return out
    cost = (w["ram_bytes"], w["disk_bytes"])
    level = [r for r in res["ranking"] if r["retention"] >= target and (r["ram_bytes"], r["disk_bytes"]) == cost]
    if len(level) > 1:
        out.append(
            f"the fastest of the {len(level)} plans that reach {100 * target:g}% at {w['ram_bytes']} B in RAM and "
            f"{w['disk_bytes']} B on disk (each measured on this machine)"
        )
    return out


def _recommend_plan(req: RecommendRequest) -> None:
    from embcompress.report.plan_files import recommend_plan_files

    with Bars() as bars:
        res = recommend_plan_files(
            req.input,
            req.model_dir,
            req.ram_budget,
            disk_budget=req.disk_budget,
            target=req.target,
            max_latency_ms=req.max_latency_ms,
            index=req.index,
            k=req.k,
            queries=req.queries,
            qrels=req.qrels,
            sample=req.sample,
            column=req.column,
            reference=req.reference,
            folds=req.folds,
            overwrite=req.overwrite,
            progress=bars.step,
            fit_progress=bars.stage("fitting the winner on all rows", None),
        )
    if req.json:
        emit(res, True)
        return
    out.print(plans_table(res))
    w = res["winner"]
    out.print(
        f"plan: {res['plan']}: retention {100 * w['retention']:.1f}% ({res['fitted']}), "
        f"{w['ram_bytes']} B/vector in RAM + {w['disk_bytes']} B/vector on disk, "
        f"{w['latency_ms']:.2f} ms per query over {res['total_rows']:,} rows"
    )
    for line in _winner_notes(res):
        out.print(line)
    if "sample_candidates" in w:
        out.print(_scaled_line(res))
    if any(r.get("rising") for r in res["ranking"][:20]):
        from embcompress.report.plans import SEARCHED_PER_CANDIDATE
        from embcompress.report.sweep import FURTHER_MULTIPLIERS

        out.print(
            "+ after a candidate count: retention was still rising where the sweep ended (at most "
            f"{res['k'] * FURTHER_MULTIPLIERS[-1]:,} candidates, fewer than 1/{SEARCHED_PER_CANDIDATE} of the "
            "sample's documents, and only while no other code with the same copy kept clearly more); "
            "more candidates, measured on a larger --sample, may keep more"
        )
    if res["within_uncertainty"]:
        out.print(
            "as good within the queries' noise, and cheaper: "
            + "; ".join(
                f"{p['label']} -> {p['copy']} x{p['candidates']} ({100 * p['retention']:.1f}%)"
                for p in res["within_uncertainty"]
            )
        )
    out.print(res["latency_note"])
    out.print(
        f"saved to {req.model_dir}; write its tiers with: embcompress apply {req.model_dir} {req.input} TIERS_DIR, "
        f"and serve them with: embcompress search TIERS_DIR QUERIES RESULTS --plan {req.model_dir}"
    )


def _scaled_line(res: dict) -> str:
    """How the winner's candidate count was scaled from the sample to the file (decision 0011)."""
    w = res["winner"]
    return (
        f"candidates: {w['sample_candidates']:,} over the {res['sample']:,} sampled documents, "
        f"{w['candidates']:,} for the file's {res['total_rows']:,} rows (x (rows / sample) ^ "
        f"{w['growth_exponent']:.2f}, the growth of this code's ranks measured on the sample; its latency "
        "scaled with the count)"
    )


def plans_table(res: dict) -> Table:
    """The ranked plans: first stage, copy, candidates, bytes, retention and latency."""
    t = Table(
        title=f"serving plans within {res['ram_budget']} B/vector in RAM ({res['metric']}, {res['fitted']})",
        title_justify="left",
    )
    for col in ("first stage", "copy", "candidates", "RAM B", "disk B", "retention", "ms/query", "ms/query (batch)"):
        t.add_column(col, justify="left" if col in ("first stage", "copy") else "right")
    for r in res["ranking"][:20]:
        ms = "-" if r["latency_ms"] is None else f"{r['latency_ms']:.2f}"
        bms = "-" if r["batch_ms"] is None else f"{r['batch_ms']:.3f}"
        t.add_row(
            r["label"],
            r["copy"],
            f"{r['candidates']}{'+' if r.get('rising') else ''}",
            str(r["ram_bytes"]),
            str(r["disk_bytes"]),
            f"{100 * r['retention']:.1f}%",
            ms,
            bms,
        )
    return t
