"""Retention reports: which compression keeps how much quality, at what size, on the user's data."""

from .grid import DEFAULT_METHODS, build_report, default_widths
from .html import render_html, write_report

__all__ = ["DEFAULT_METHODS", "build_report", "default_widths", "render_html", "write_report"]
