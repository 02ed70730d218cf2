"""The report's serving-plan section: the best plan per RAM budget with the code-only answer beside
it, and quality against RAM bytes per vector, one curve per rescoring copy, candidate counts marked."""

from __future__ import annotations

import html
import math
from typing import Any

#: one curve per copy; the code-only plans (no copy, or the codes rescoring themselves) share one
CURVES = {"codes only": "#555", "int8": "#1f77b4", "int8r": "#9467bd", "float16": "#2ca02c", "float32": "#d62728"}
#: (dash pattern, line width, marker radius) per curve: curves that keep the same retention lie on each other,
#: so each is drawn so that the ones under it still show (a wide solid line and a large marker first)
STYLES = {
    "codes only": ("", 1.8, 4),
    "int8": ("", 4.5, 6.5),
    "int8r": ("6 3", 3.2, 5.5),
    "float16": ("8 4", 2.4, 4.5),
    "float32": ("2 3", 1.6, 2.5),
}
W, H, PAD, TOP = 640, 300, 56, 20
LEFT = ' style="text-align:left"'  # text columns read left to right


def _curve(copy: str) -> str:
    return "codes only" if copy in ("none", "decoded") else copy


def _best_per_curve(plans: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """curve -> the best plan of that copy at each RAM budget, smallest budget first."""
    out: dict[str, list[dict[str, Any]]] = {c: [] for c in CURVES}
    for budget in sorted(plans, key=int):
        by: dict[str, dict[str, Any]] = {}
        for p in plans[budget]["ranking"]:
            c = _curve(p["copy"])
            if c not in by or p["retention"] > by[c]["retention"]:
                by[c] = p
        for c, p in by.items():
            out[c].append({**p, "budget": int(budget)})
    return {c: v for c, v in out.items() if v}


def _curve_svg(c: str, v: list[dict[str, Any]], px, py, labels: list[tuple[float, float]]) -> list[str]:
    """One copy's curve: its line in its style, a marker per RAM budget (its plan as a tooltip) and the
    candidate count beside it, moved under a count already printed there (``labels``, extended)."""
    dash, width, radius = STYLES[c]
    pts = " ".join(f"{px(p['budget']):.1f},{py(p['retention']):.1f}" for p in v)
    out = [
        f'<polyline points="{pts}" fill="none" stroke="{CURVES[c]}" stroke-width="{width}"'
        + (f' stroke-dasharray="{dash}"' if dash else "")
        + "/>"
    ]
    for p in v:
        x, y = px(p["budget"]), py(p["retention"])
        ly = y - 5
        while any(abs(x - ox) < 1 and abs(ly - oy) < 10 for ox, oy in labels):
            ly += 11
        labels.append((x, ly))
        tip = (
            f"{p['label']} -> {c}, {p['candidates']} candidates: retention {100 * p['retention']:.1f}%, "
            f"{p['ram_bytes']} B RAM + {p['disk_bytes']} B disk"
        )
        out.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius}" fill="{CURVES[c]}">'
            f"<title>{html.escape(tip)}</title></circle>"
            f'<text x="{x + 8:.1f}" y="{ly:.1f}" font-size="10" fill="{CURVES[c]}">'
            f"{p['candidates']}</text>"
        )
    return out


def plans_plot(plans: dict[str, Any]) -> str:
    curves = _best_per_curve(plans)
    points = [p for v in curves.values() for p in v]
    xs = [p["budget"] for p in points]
    ys = [p["retention"] for p in points]
    lo_x, hi_x = math.log2(min(xs)) - 0.4, math.log2(max(xs)) + 0.4
    lo_y, hi_y = max(0.0, min(ys) - 0.05), max(1.01, max(ys) + 0.01)
    px = lambda b: PAD + (math.log2(b) - lo_x) / (hi_x - lo_x) * (W - 2 * PAD)  # noqa: E731
    py = lambda r: H - PAD + (lo_y - r) / (hi_y - lo_y) * (H - PAD - TOP)  # noqa: E731
    out = [
        f'<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="retention against RAM bytes '
        f'per vector, one curve per rescoring copy">',
        f'<rect x="{PAD}" y="{TOP}" width="{W - 2 * PAD}" height="{H - PAD - TOP}" fill="#fafafa" stroke="#ccc"/>',
    ]
    for b in sorted(set(xs)):
        out.append(f'<text x="{px(b):.1f}" y="{H - PAD + 16}" font-size="11" text-anchor="middle">{b}</text>')
    step = 0.05 if hi_y - lo_y <= 0.5 else 0.1
    t = math.ceil(lo_y / step) * step
    while t <= hi_y + 1e-9:
        out.append(
            f'<line x1="{PAD}" y1="{py(t):.1f}" x2="{W - PAD}" y2="{py(t):.1f}" stroke="#eee"/>'
            f'<text x="{PAD - 6}" y="{py(t) + 4:.1f}" font-size="11" text-anchor="end">{100 * t:.0f}%</text>'
        )
        t += step
    out.append(
        f'<text x="{W / 2}" y="{H - 14}" font-size="12" text-anchor="middle">'
        "RAM bytes per vector (log scale)</text>"
        f'<text x="14" y="{H / 2}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {H / 2})">retention</text>'
    )
    labels: list[tuple[float, float]] = []  # where a count is printed already: one that would touch it goes under
    for c, v in curves.items():
        out += _curve_svg(c, v, px, py, labels)
    out.append("</svg>")
    return "".join(out) + _legend(curves)


def _legend(curves) -> str:
    """Each curve's line as drawn, and what the numbers are."""
    legend = "".join(
        f'<span class="key"><svg width="26" height="10"><line x1="0" y1="5" x2="26" y2="5" stroke="{CURVES[c]}" '
        f'stroke-width="{STYLES[c][1]}"' + (f' stroke-dasharray="{STYLES[c][0]}"' if STYLES[c][0] else "") + "/></svg> "
        f"{html.escape(c)}</span>"
        for c in curves
    )
    return f'<div class="legend">{legend}<span class="key">numbers: candidates rescored per query</span></div>'


def _ms(v) -> str:
    return "-" if v is None else f"{v:.2f} ms"


def plans_html(plans: dict[str, Any]) -> str:
    """The section: a table of the best plan per RAM budget beside the code-only answer, then the plot."""
    rows = []
    for budget in sorted(plans, key=int, reverse=True):
        res = plans[budget]
        w, c = res["winner"], res["code_only"]
        copy = "its codes, asymmetric" if w["copy"] == "decoded" else w["copy"]
        rows.append(
            f"<tr><td>{int(budget)} B</td>"
            f"<td{LEFT}>{html.escape(w['label'])} &rarr; {html.escape(copy)}, {w['candidates']} candidates</td>"
            f"<td>{w['disk_bytes']} B</td><td><b>{100 * w['retention']:.1f}%</b></td>"
            f"<td>{_ms(w['latency_ms'])}</td><td{LEFT}>{html.escape(c['label'])}</td>"
            f"<td>{100 * c['retention']:.1f}%</td></tr>"
        )
    first = plans[next(iter(plans))]
    return f"""<h2>Serving plans: the best per RAM budget</h2>
<p>A plan keeps the codes in RAM, takes the top candidates from them and rescores those from a copy of the documents
on disk. Retention is {html.escape(first["metric"])}, {html.escape(first["fitted"])}; latency is one query on this
machine, scaled to {first["total_rows"]:,} rows ({html.escape(first["latency_note"])}). Write a plan with
<code>embcompress recommend INPUT PLAN --ram-budget B</code>.</p>
<table><thead><tr><th>RAM / vector</th><th{LEFT}>best plan</th><th>disk / vector</th><th>retention</th>
<th>latency</th><th{LEFT}>codes only</th><th>retention</th></tr></thead><tbody>{"".join(rows)}</tbody></table>
{plans_plot(plans)}"""
