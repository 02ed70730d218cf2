"""Retention reports: which compression keeps how much quality, at what size, on the user's data."""

from .analyze import analyze_file, write_curve
from .grid import DEFAULT_METHODS, build_report, default_widths, report_files
from .html import render_html, write_report

__all__ = ["DEFAULT_METHODS", "analyze_file", "build_report", "default_widths", "render_html", "report_files",
           "write_curve", "write_report"]
