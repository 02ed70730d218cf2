"""Shared CLI plumbing: one-line errors, progress bars on stderr, JSON or table output."""

from __future__ import annotations

import functools
import json
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from embcompress.errors import EmbcompressError

out = Console(soft_wrap=True)
if not out.is_terminal:  # piped or captured: tables keep their full width instead of 80 columns
    out = Console(soft_wrap=True, width=160)
err = Console(stderr=True, soft_wrap=True)

# Option declarations shared by the file commands (one place, same help everywhere).
ColumnOpt = typer.Option(None, "--column", "-c", help="Embedding column (default: the only float-list column, or 'embedding').")
IdColumnOpt = typer.Option(None, "--id-column", help="Id column carried to the output (default: 'id' if present).")
KeepOpt = typer.Option([], "--keep", help="Other columns to carry to the output (repeatable).")
BatchOpt = typer.Option(None, "--batch-size", "-b", min=1, help="Rows per batch (default: about 4 MiB of input per batch, which reads fastest).")
OverwriteOpt = typer.Option(False, "--overwrite", help="Replace the output if it exists.")
JsonOpt = typer.Option(False, "--json", help="Print the result as JSON on stdout.")


def fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def guarded(fn: Callable) -> Callable:
    """Turn library errors into one line on stderr and exit code 1, without a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EmbcompressError as exc:
            fail(str(exc))
        except PermissionError as exc:
            fail(f"permission denied: {exc.filename or exc}")
        except OSError as exc:
            fail(f"{exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}")
        except KeyboardInterrupt:
            fail("interrupted; no output was written", code=130)

    return wrapper


@contextmanager
def warnings_to_stderr() -> Iterator[None]:
    """Library warnings (e.g. qrels naming unknown ids) as one 'warning:' line each on stderr."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        err.print(f"warning: {w.message}", highlight=False)


@contextmanager
def progress_bar(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr (only when stderr is a terminal); yields an advance(n)."""
    show = err.is_terminal
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), console=err, transient=True, disable=not show,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def emit(result: dict[str, Any], as_json: bool, table: Table | None = None) -> None:
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
    elif table is not None:
        out.print(table)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def kv_table(title: str, rows: dict[str, Any]) -> Table:
    t = Table(title=title, show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    for k, v in rows.items():
        t.add_row(k, str(v))
    return t
