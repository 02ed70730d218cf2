"""Retention reports: which compression keeps how much quality, at what size, on the user's data."""

from .analyze import analyze_file, write_curve
from .files import report_files
from .grid import DEFAULT_METHODS, build_report, default_widths
from .html import render_html, write_report

__all__ = [
    "DEFAULT_METHODS",
    "analyze_file",
    "build_report",
    "default_widths",
    "render_html",
    "report_files",
    "write_curve",
    "write_report",
]
