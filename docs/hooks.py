"""MkDocs hooks: the generated references.

* ``<!-- generated: cli -->``: every command of the ``embcompress`` Typer app, with its arguments and
  options, read from the app itself (so the page cannot drift from the command line);
* ``<!-- generated: budget-table -->``, ``plans-table``, ``plans-label-free-table``, ``plan-10m`` and
  ``10m-table``: the benchmark tables, from the JSON in ``benchmarks/results`` (the same generators
  that write the READMEs' tables);
* ``<!-- generated: results-index -->``: every benchmark folder with its question and its results files.

A marker with no generator fails the build (it would otherwise stay an invisible HTML comment).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _param_rows(cmd, ctx) -> list[str]:
    """A table of a command's arguments and options (Typer's parameters, read by their attributes)."""
    rows = ["| name | kind | type | default | what it does |", "|---|---|---|---|---|"]
    for p in cmd.params:
        if p.name == "help":
            continue
        option = p.param_type_name == "option"
        names = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts]) if option else f"`{p.name.upper()}`"
        kind = ("flag" if getattr(p, "is_flag", False) else "option") if option else "argument"
        default = "" if p.required or p.default in (None, (), [], False) else f"`{p.default}`"
        text = (p.help or "").replace("|", "\\|").replace("\n", " ")
        shown = p.display_type(ctx).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        rows.append(f"| {names} | {kind}{' (required)' if p.required else ''} | {shown} | {default} | {text} |")
    return rows


def cli_reference() -> str:
    import typer
    from typer._click.core import Context

    from embcompress.cli.main import app

    group = typer.main.get_command(app)
    ctx = Context(group, info_name="embcompress")
    out = [f"`embcompress` has {len(group.commands)} commands. `embcompress COMMAND --help` prints the same.", ""]
    for name in sorted(group.commands):
        cmd = group.commands[name]
        sub = Context(cmd, info_name=name, parent=ctx)
        out += [
            f"## `{name}`",
            "",
            (cmd.help or "").strip().split("\n\n")[0],
            "",
            "```text",
            cmd.get_usage(sub).replace("Usage: ", ""),
            "```",
            "",
            *_param_rows(cmd, sub),
            "",
        ]
    return "\n".join(out)


def _tool(name: str):
    for folder in (ROOT / "benchmarks", ROOT / "benchmarks" / "tools"):  # _util, and the tool itself
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    return __import__(name)


def budget_table() -> str:
    results = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("big-*.json"))]
    return _tool("budget_table").table(results) if results else "*(no results yet)*"


def plans_table() -> str:
    files = sorted(RESULTS.glob("plans-*.json"))
    if not files:
        return "*(no serving-plan results yet: run `benchmarks/serving/bench_plans.py`)*"
    return _tool("plans_table").table([json.loads(p.read_text()) for p in files])


def _made_from(r: dict) -> str:
    """The set a 10M run served: what ``bench_10m.py make`` built it from (runs before the set was recorded
    used its source of the time, Debian's vectors)."""
    made = r.get("set", "Debian IR vectors + noise")
    for source, name in (
        ("big/minilm", "big corpus (MiniLM) + noise"),
        ("big/mpnet-static", "big corpus (mpnet-static) + noise"),
    ):
        if source in made:
            return name
    return made


def _graph_mib(r: dict) -> str:
    """The mapped graph beside the codes in a 10M run's memory, when it has one."""
    graph = (r.get("apply") or {}).get("graph_bytes") or 0
    return f" + a {graph / 2**20:,.0f} MiB graph, mapped" if graph else ""


def _held(r: dict) -> str:
    """How many of the exact top 10 the first stage's candidates held (the most a copy can rescore into place);
    for a graph, the same codes scanned exactly beside it."""
    c = r.get("candidate_recall")
    if c is None:
        return "-"
    same, wider = c.get("exact_scan_same_codes"), c.get("graph_wider_then_asymmetric", {})
    more = [] if same is None else [f"no graph: {same:.3f}"]
    if wider:
        more.append(
            f"graph exploring {' / '.join(f'{w}x' for w in wider)}, codes vs float query: "
            + " / ".join(f"{v:.3f}" for v in wider.values())
        )
    return f"{c['first_stage']:.3f}" + (f" ({'; '.join(more)})" if more else "")


def plan_10m_table() -> str:
    """The 48 B serving plans over ten million rows, from ``plan-10m-*.json``: per set, first stage and copy."""
    runs = [json.loads(f.read_text()) for f in RESULTS.glob("plan-10m-*.json")]
    if not runs:
        return "*(no 10M results yet: run `benchmarks/serving/bench_plan_10m.py`)*"
    runs.sort(key=lambda r: (_made_from(r), r.get("structure", "exact"), r.get("copy", "int8"), r["candidates"]))
    out = [
        "| set | plan | candidates | recall@10 vs exact float | exact top 10 in the candidates | warm p50 / p99 "
        "| cold p50 / p99 | peak RSS (codes) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    applied = {}
    for r in runs:
        warm = r["serve"]["warm"]
        cold = r["serve"].get("cold", {}).get("cold")
        cold_text = "-" if cold is None else f"{cold['p50_ms']:.0f} / {cold['p99_ms']:.0f} ms"
        graph = " through an HNSW graph" if r.get("structure") == "hnsw" else ""
        if r.get("explore", 1) > 1:
            graph += f" exploring {r['explore']}x, ranked by the codes against the float query"
        plan = f"`{r['spec']}`{graph} + {r.get('copy', 'int8')} on disk"
        out.append(
            f"| {_made_from(r)} | {plan} | {r['candidates']} | {r['recall_at_10']:.3f} | {_held(r)} | "
            f"{warm['warm']['p50_ms']:.0f} / {warm['warm']['p99_ms']:.0f} ms | {cold_text} | "
            f"{warm['peak_rss_mib']:.0f} MiB ({warm['first_stage_mib']:.0f} MiB{_graph_mib(r)}) |"
        )
        a = r["apply"]
        if "seconds" not in a:  # tiers another run's apply wrote (bench_plan_10m.py --reuse, --link-tiers)
            continue
        applied.setdefault(
            (_made_from(r), plan),
            f"{_made_from(r)}, {plan}: {a['rows']:,} rows in {a['seconds']:.0f} s "
            f"({a['rows_per_second']:,.0f} rows/s), peak RSS {a['peak_rss_mib']:.0f} MiB"
            + (f", the graph built in {a['graph_seconds']:.0f} s" if a.get("graph_seconds") else "")
            + f" ({r['machine']}, {r['date']})",
        )
    out += ["", "`apply` of each plan: " + "; ".join(applied.values()) + ". One thread per query."]
    out += [f"{r['candidates']} candidates, {_made_from(r)}: {r['note']}." for r in runs if r.get("note")]
    return "\n".join(out)


def plans_label_free_table() -> str:
    files = sorted(RESULTS.glob("plans-*.json"))
    results = [json.loads(p.read_text()) for p in files]
    if not any("label_free" in b for r in results for b in r["budgets"].values()):
        return "*(no label-free plan comparison yet: run `benchmarks/serving/bench_plans.py`)*"
    return _tool("plans_table").label_free_table(results)


def ten_million_table() -> str:
    files = sorted(RESULTS.glob("10m-*.json"))
    return _tool("ten_million_table").table(files) if files else "*(no 10M results yet)*"


def results_index() -> str:
    return _tool("results_index").index(links=False)


GENERATED = {
    "cli": cli_reference,
    "budget-table": budget_table,
    "plans-table": plans_table,
    "plans-label-free-table": plans_label_free_table,
    "plan-10m": plan_10m_table,
    "10m-table": ten_million_table,
    "results-index": results_index,
}


def on_page_markdown(markdown: str, page, config, files) -> str:
    for key, make in GENERATED.items():
        marker = f"<!-- generated: {key} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    unknown = re.findall(r"<!-- generated: ([^ ]+) -->", markdown)
    if unknown:
        raise ValueError(f"{page.file.src_path}: no generator for {', '.join(unknown)}; known: {', '.join(GENERATED)}")
    return markdown
