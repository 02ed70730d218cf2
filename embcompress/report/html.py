"""Render a report as one self-contained HTML page: inline CSS and SVG plots, no script, no
external file, so it reads offline in any browser; plus the JSON beside it."""

from __future__ import annotations

import html
import json
import math
import os
import zlib
from pathlib import Path
from typing import Any

from .plans_html import plans_html
from ..core._fs import atomic_dir
from .references import REFERENCES

COLORS = {
    "float": "#222222",
    "truncate": "#1f77b4",
    "truncate+binary": "#6baed6",
    "random_select": "#aec7e8",
    "random_select+binary": "#c6dbef",
    "random_projection": "#9467bd",
    "random_projection+binary": "#c5b0d5",
    "pca": "#2ca02c",
    "pca+binary": "#98df8a",
    "geopres": "#d62728",
    "geopres+binary": "#ff9896",
    "autoencoder": "#8c564b",
    "binary": "#ff7f0e",
    "binary+rerank": "#ffbb78",
    "int8": "#17becf",
}


#: the code families' colours in the plots; a family not listed gets one derived from its name
FAMILY_COLORS = {
    "binary": "#e377c2",
    "sq": "#bcbd22",
    "pq": "#c7c7c7",
    "opq": "#7f7f7f",
    "rq": "#9edae5",
    "rabitq": "#f7b6d2",
}


def color(method: str) -> str:
    """A method's colour; a code family ("codes: NAME") has its own, or one derived from its name
    (the same in every report)."""
    if method in COLORS:
        return COLORS[method]
    if method.startswith("codes: "):
        name = method[len("codes: ") :]
        return FAMILY_COLORS.get(name) or "#%06x" % (zlib.crc32(name.encode()) & 0x7F7F7F | 0x404040)
    return "#777"


W, H, PAD = 640, 360, 56
TOP = 16  # nothing is drawn above a plot: less margin there than beside and below it


def in_sample_queries(rows) -> int | None:
    """How many queries the in-sample figures of ``rows`` were measured on, when fewer than all
    (:data:`~embcompress.evaluation.evaluate.IN_SAMPLE_QUERIES`), else None."""
    return max({r.get("in_sample_queries") for r in rows} - {None}, default=None)


def _in_sample_note(rows) -> str:
    n = in_sample_queries(rows)
    return f" (measured on a seeded sample of {n:,} of the queries)" if n else ""


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _fmt(x: Any, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if pct:
        return f"{100 * x:.1f}%"
    return f"{x:.4f}" if isinstance(x, float) else str(x)


def _retention_plot(rows: list[dict], budget: int | None) -> str:
    xs = [r["bytes_per_vector"] for r in rows]
    ys = [r["retention"] for r in rows if not math.isnan(r["retention"])]
    lo_x, hi_x = math.log2(min(xs)) - 0.3, math.log2(max(xs)) + 0.3
    lo_y = max(0.0, min(ys) - 0.05) if ys else 0.0
    hi_y = max(1.02, max(ys) + 0.01) if ys else 1.0
    px = lambda b: PAD + (math.log2(b) - lo_x) / (hi_x - lo_x) * (W - 2 * PAD)  # noqa: E731
    py = lambda r: H - PAD + (lo_y - r) / (hi_y - lo_y) * (H - PAD - TOP)  # noqa: E731
    out = [
        f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="retention against '
        "bytes per "
        'vector">',
        f'<rect x="{PAD}" y="{TOP}" width="{W - 2 * PAD}" height="{H - PAD - TOP}" fill="#fafafa" stroke="#ccc"/>',
    ]
    out += _axes(px, py, (lo_x, hi_x), (lo_y, hi_y))
    if budget:
        x = px(budget)
        out.append(
            f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - PAD}" stroke="#c00" stroke-dasharray="4 3"/>'
            f'<text x="{x + 4:.1f}" y="{TOP + 12}" font-size="11" fill="#c00">budget {budget} B</text>'
        )
    front = sorted((r for r in rows if r.get("pareto")), key=lambda r: r["bytes_per_vector"])
    if len(front) > 1:
        pts = " ".join(f"{px(r['bytes_per_vector']):.1f},{py(r['retention']):.1f}" for r in front)
        out.append(f'<polyline points="{pts}" fill="none" stroke="#555" stroke-width="1.5" stroke-dasharray="5 3"/>')
    out += [_marker(r, px(r["bytes_per_vector"]), py(r["retention"])) for r in rows if not math.isnan(r["retention"])]
    out.append("</svg>")
    legend = "".join(
        f'<span class="key"><i style="background:{color(m)}"></i>{_esc(m)}</span>'
        for m in dict.fromkeys(r["method"] for r in rows)
    )
    return (
        "".join(out) + f'<div class="legend">{legend}<span class="key">dashed line: Pareto front; squares need the '
        "original vectors too</span></div>"
    )


def _axes(px, py, xs: tuple[float, float], ys: tuple[float, float]) -> list[str]:
    """The retention plot's grid and labels: a line at every power of two of bytes (``xs``: log2 range) and
    every 5 or 10 points of retention (``ys``), with the axes' titles."""
    (lo_x, hi_x), (lo_y, hi_y) = xs, ys
    out = []
    b = 2 ** math.ceil(lo_x)
    while b <= 2**hi_x:
        x = px(b)
        out.append(
            f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - PAD}" stroke="#eee"/>'
            f'<text x="{x:.1f}" y="{H - PAD + 16}" font-size="11" text-anchor="middle">{b:g}</text>'
        )
        b *= 2
    step = 0.05 if hi_y - lo_y <= 0.5 else 0.1
    t = math.ceil(lo_y / step) * step
    while t <= hi_y + 1e-9:
        y = py(t)
        out.append(
            f'<line x1="{PAD}" y1="{y:.1f}" x2="{W - PAD}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text x="{PAD - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{100 * t:.0f}%</text>'
        )
        t += step
    out.append(
        f'<text x="{W / 2}" y="{H - 12}" font-size="12" text-anchor="middle">bytes per vector (log scale)</text>'
        f'<text x="14" y="{H / 2}" font-size="12" text-anchor="middle" '
        'transform="rotate(-90 '
        "14 "
        f'{H / 2})">retention</text>'
    )
    return out


def _marker(r: dict[str, Any], x: float, y: float) -> str:
    """One configuration's point at (``x``, ``y``): a circle, larger on the Pareto front, or a square when it
    needs the original vectors too; its tooltip says what it is."""
    c = color(r["method"])
    shape = "rect" if r.get("extra_storage") else "circle"
    tip = (
        f"{r['config']}: {r['bytes_per_vector']} B, retention {100 * r['retention']:.1f}%, rank proxy "
        f"{r['rank_proxy']:.3f}"
    )
    if shape == "circle":
        return (
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{5 if r.get("pareto") else 4}" '
            f'fill="{c}" '
            'stroke="#333" '
            f'stroke-width="{1.2 if r.get("pareto") else 0.4}"><title>{_esc(tip)}</title></circle>'
        )
    else:
        return (
            f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" '
            f'fill="{c}" '
            'stroke="#333" '
            f'stroke-width="0.4"><title>{_esc(tip + " (+ originals for the rerank)")}</title></rect>'
        )


def _variance_plot(curve: list[float], components: int, threshold: float) -> str:
    n = len(curve)
    px = lambda i: PAD + i / max(1, n - 1) * (W - 2 * PAD)  # noqa: E731
    py = lambda v: H - PAD - v * (H - PAD - TOP)  # noqa: E731
    pts = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in enumerate(curve))
    out = [
        f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="cumulative explained variance">',
        f'<rect x="{PAD}" y="{TOP}" width="{W - 2 * PAD}" height="{H - PAD - TOP}" fill="#fafafa" stroke="#ccc"/>',
    ]
    for v in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(
            f'<line x1="{PAD}" y1="{py(v):.1f}" x2="{W - PAD}" y2="{py(v):.1f}" stroke="#eee"/>'
            f'<text x="{PAD - 6}" y="{py(v) + 4:.1f}" font-size="11" text-anchor="end">{100 * v:.0f}%</text>'
        )
    for i in range(0, n + 1, max(1, n // 8)):
        out.append(
            f'<text x="{px(max(i - 1, 0)):.1f}" y="{H - PAD + 16}" font-size="11" text-anchor="middle">{i}</text>'
        )
    out.append(f'<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    out.append(
        f'<line x1="{PAD}" y1="{py(threshold):.1f}" x2="{W - PAD}" '
        f'y2="{py(threshold):.1f}" '
        'stroke="#c00" '
        'stroke-dasharray="4 3"/>'
        f'<line x1="{px(components - 1):.1f}" y1="{TOP}" x2="{px(components - 1):.1f}" '
        f'y2="{H - PAD}" '
        'stroke="#c00" '
        'stroke-dasharray="4 3"/>'
        f'<text x="{px(components - 1) + 4:.1f}" y="{py(threshold) + 14:.1f}" '
        'font-size="11" '
        f'fill="#c00">{components} '
        f"components reach {100 * threshold:.0f}%</text>"
    )
    out.append(f'<text x="{W / 2}" y="{H - 12}" font-size="12" text-anchor="middle">principal components</text></svg>')
    return "".join(out)


def _rate(v) -> str:
    return "-" if v is None else f"{v:,.0f}"


def sampled_line(counts: dict[str, int]) -> str:
    """One sentence on a sample: a uniform one (:func:`embcompress.report.task_files.load_task_files`) or a
    judged one (:func:`embcompress.report.task_files.judged_subset`'s counts)."""
    c = counts
    if "judged_documents" not in c:
        return (
            f"a uniform sample of {c['kept_documents']:,} of {c['documents']:,} documents, drawn across the whole "
            f"file with seed {c['seed']}"
        )
    return (
        f"sampled {c['kept_documents']:,} of {c['documents']:,} documents: the {c['judged_documents']:,} judged "
        f"relevant to {c['kept_queries']:,} of {c['queries']:,} queries (drawn with seed {c['seed']}) and "
        f"{c['kept_documents'] - c['judged_documents']:,} others at random; scores on a smaller corpus are "
        "higher, retention (over float32 on the same sample) is what compares"
    )


def _rows_html(rows: list[dict[str, Any]], s: dict[str, Any], best, columns: int) -> list[str]:
    """The long table's rows, codes grouped by ratio (:func:`_grouped`)."""
    body = []
    full = 4 * s["dim"]
    for r in _grouped(rows, columns):
        if isinstance(r, str):  # a group's heading row
            body.append(r)
            continue
        cls = " ".join(
            c
            for c, on in (
                ("pareto", r.get("pareto")),
                ("best", r["config"] == best),
                ("over", r.get("within_budget") is False),
            )
            if on
        )
        extra = " <small>(+ originals)</small>" if r.get("extra_storage") else ""
        body.append(
            f'<tr class="{cls}"><td>{_esc(r["config"])}{extra}</td><td>{r["bytes_per_vector"]}</td>'
            f"<td>{full / r['bytes_per_vector']:.0f}x</td><td>{_fmt(r['score'])}</td>"
            f"<td>{_fmt(r['retention'], True)}</td>"
            f"<td>{_fmt(r.get('retention_in_sample'), True)}</td><td>{_fmt(r['rank_proxy'])}</td>"
            f"<td>{r['fit_seconds']:.2f}</td><td>{_rate(r.get('encode_rows_per_second'))}</td>"
            f"<td>{r['eval_seconds']:.2f}</td></tr>"
        )
    return body


_STYLE = """body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1000px; color: #222; padding: 0
1em; }
table { border-collapse: collapse; margin: 1em 0; } th, td { padding: 4px 10px; border-bottom: 1px solid #ddd;
text-align: right; }
th:first-child, td:first-child { text-align: left; } thead th { background: #f2f2f2; }
tr.pareto td:first-child::after { content: " ◆"; color: #555; } tr.best { background: #fff3c4; font-weight: bold; }
tr.over { color: #999; } .legend { font-size: 12px; margin: 4px 0 1.5em; } .key { margin-right: 12px; white-space:
nowrap; }
.key i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; border: 1px solid #333; }
small { color: #777; } tr.group th { text-align: left; background: #fafafa; }
table.answer { font-size: 1.05em; } table.answer td:nth-child(2), table.answer th:nth-child(2) { text-align: left; }
"""


#: the columns of the report's table (the task's metric comes fourth)
_COLUMNS = (
    "configuration",
    "bytes / vector",
    "smaller by",
    "retention<br><small>unseen documents</small>",
    "retention<br><small>in-sample</small>",
    "rank proxy",
    "fit s",
    "encode rows/s",
    "eval s",
)


def _facts_html(s: dict[str, Any]) -> str:
    """The table of facts about the sample: its size, the queries, the width, the scores, the intrinsic
    dimensionality, uniformity and how well the rank proxy predicts retention."""
    corr = s.get("proxy_retention_spearman")
    facts = [
        (
            "vectors in the sample",
            f"{s['vectors']:,}" + (f" ({sampled_line(s['sampled_from'])})" if s.get("sampled_from") else ""),
        ),
        *([("queries", s["queries_note"])] if s.get("queries_note") else []),
        ("dimensions", s["dim"]),
        ("task score", s["metric"]),
        ("float32 score", _fmt(s["float_score"])),
        (
            f"intrinsic dimensionality ({100 * s['intrinsic_threshold']:.0f}% variance)",
            f"{s['intrinsic_dimensionality']} of {s['dim']}",
        ),
        ("uniformity (Dinu et al., 2025; higher = more concentrated)", f"{s['uniformity']:.4f}"),
        (
            f"Spearman correlation of rank proxy and retention ({s.get('proxy_retention_configs', '?')} "
            "configurations, reranks included)",
            _fmt(corr),
        ),
    ]
    return "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in facts)


def render_html(report: dict[str, Any], title: str = "embcompress retention report") -> str:
    s, rows = report["summary"], report["rows"]
    best = s.get("best_within_budget")
    head = "".join(f"<th>{h}</th>" for h in (*_COLUMNS[:3], _esc(s["metric"]), *_COLUMNS[3:]))
    body = _rows_html(rows, s, best, len(head.split("<th>")) - 1)
    budget_line = ""
    if s.get("budget_bytes"):
        budget_line = (
            f"<p><b>Budget {s['budget_bytes']} bytes per vector:</b> best is <b>{_esc(best)}</b>.</p>"
            if best
            else f"<p><b>Budget {s['budget_bytes']} bytes per vector:</b> no configuration fits.</p>"
        )
    facts_html = _facts_html(s)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>
<style>
{_STYLE}</style></head><body>
<h1>{_esc(title)}</h1>
<p>Which compression keeps how much of the task score on these embeddings. Retention = compressed score / float32 score,
measured on documents the fit did not see: every code is fitted on one half of the sample and encodes the other half
(and the reverse), as most rows of a file larger than the fit sample are new to it. The in-sample figure of the same
fits (each half encoded by the model fitted on it) stands beside it: the gap is what a code
memorized{_in_sample_note(rows)}.
The rank proxy needs no labels: sampled documents are searched as queries, exactly as each configuration searches
(Hamming, lookup tables, asymmetric or float rerank), and it is the mean nDCG@10 of those rankings with each query's
10 nearest documents by float cosine as the relevant ones (after the rank statistics of Kalyfommatos et al., 2025);
it predicts retention (the correlation for this data is shown below). ◆ marks the Pareto front
(no other configuration is both smaller and better).</p>
{plans_html(report["plans"]) if report.get("plans") else ""}
{_answer(s)}
<table class="facts">{facts_html}</table>
{budget_line}
<h2>Retention against size</h2>
{_retention_plot(rows, s.get("budget_bytes"))}
<h2>All configurations</h2>
<p>Dimension reductions, sign bits and int8 first, then the code families by the compression they were planned for;
each code's label gives its own size.</p>
<table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>
<h2>Explained variance</h2>
<p>Cumulative share of the variance explained by the leading principal components; fewer components for the same share
(lower intrinsic dimensionality) goes with better retention under compression (Dinu et al., 2025).</p>
{_variance_plot(report["explained_variance"], s["intrinsic_dimensionality"], s["intrinsic_threshold"])}
<h2>References</h2>
<ul>{
        "".join(
            f"<li><small>{html.escape(k)}: {html.escape(v)}</small></li>" for k, v in REFERENCES.items() if k in _CITED
        )
    }</ul>
<p><small>Made by embcompress. The same figures are in report.json.</small></p>
</body></html>
"""


def _answer(s: dict[str, Any]) -> str:
    """The page's first table: per ratio, the best code on documents its fit did not see."""
    best = s.get("best_per_ratio") or []
    if not best:
        return ""
    body = "".join(
        f"<tr><td>{b['ratio']}x</td><td>{_esc(b['config'])}</td><td>{b['bytes_per_vector']}</td>"
        f"<td>{_fmt(b['retention'], True)}{_interval(b.get('retention_ci95'))}</td>"
        f"<td>{_fmt(b.get('retention_in_sample'), True)}</td>"
        f"<td>{_esc(', '.join(b.get('within_uncertainty') or [])) or '–'}</td>"
        f"<td>{b['fit_seconds']:.2f}</td><td>{_rate(b.get('encode_rows_per_second'))}</td></tr>"
        for b in best
    )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "smaller by",
            "best code",
            "bytes / vector",
            "retention<br><small>unseen documents, 95% interval</small>",
            "retention<br><small>in-sample</small>",
            "as good within the queries' noise",
            "fit s",
            "encode rows/s",
        )
    )
    note = (
        "<p><small>The interval is a bootstrap over the queries. A code named as good within the queries' "
        "noise trails the best by less than one standard error of the paired difference: which of them "
        "leads can turn with the queries, and with the fit's training sample. Choose between them on cost.</small></p>"
        if any(b.get("within_uncertainty") for b in best)
        else ""
    )
    return (
        f'<h2>The answer: the best code per size</h2><table class="answer"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>{note}"
    )


def _interval(ci) -> str:
    return "" if not ci else f" <small>({100 * ci[0]:.1f}–{100 * ci[1]:.1f})</small>"


def _grouped(rows: list[dict[str, Any]], columns: int) -> list:
    """The rows with the codes grouped by the ratio they were planned for, each group under a
    heading row; the other configurations first, in their order."""
    plain = [r for r in rows if not r.get("ratio")]
    out: list = list(plain)
    for ratio in sorted({r["ratio"] for r in rows if r.get("ratio")}):
        out.append(f'<tr class="group"><th colspan="{columns}">codes at {ratio}x</th></tr>')
        out += [r for r in rows if r.get("ratio") == ratio]
    return out


#: the papers this page cites
_CITED = ("Dinu et al., 2025", "Kalyfommatos et al., 2025")


def write_report(report: dict[str, Any], out_dir: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Write ``report.json`` and ``report.html`` into ``out_dir`` (atomically, as a directory)."""
    with atomic_dir(out_dir, overwrite=overwrite) as tmp:
        (tmp / "report.json").write_text(json.dumps(report, indent=2, allow_nan=True) + "\n")
        (tmp / "report.html").write_text(render_html(report))
    return Path(out_dir)
