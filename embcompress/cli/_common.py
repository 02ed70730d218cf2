"""Shared CLI plumbing: one-line errors, progress bars on stderr, JSON or table output."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import typing
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from embcompress.core.errors import EmbcompressError

try:  # typer >= 0.2x prints a type beside every option, "<bool>" beside flags, which take no value
    from typer.core import TyperOption

    _display_type = TyperOption.display_type_rich

    def _type_unless_flag(self, ctx):
        return None if self.is_flag else _display_type(self, ctx)

    TyperOption.display_type_rich = _type_unless_flag  # type: ignore[method-assign]
except (ImportError, AttributeError):  # older typer: flags already show without a type
    pass

out = Console(soft_wrap=True)
if not out.is_terminal:  # piped or captured: tables keep their full width instead of 80 columns
    out = Console(soft_wrap=True, width=160)
err = Console(stderr=True, soft_wrap=True)

# Option declarations shared by the file commands (one place, same help everywhere).
ColumnOpt = typer.Option(
    None, "--column", "-c", help="Embedding column (default: the only float-list column, or 'embedding')."
)
IdColumnOpt = typer.Option(None, "--id-column", help="Id column carried to the output (default: 'id' if present).")
KeepOpt = typer.Option([], "--keep", help="Other columns to carry to the output (repeatable).")
BatchOpt = typer.Option(
    None,
    "--batch-size",
    "-b",
    min=1,
    help="Rows per batch (default: about 4 MiB of input per batch, which reads fastest).",
)
OverwriteOpt = typer.Option(False, "--overwrite", help="Replace the output if it exists.")
EngineOpt = typer.Option(
    "local",
    "--engine",
    help="local (this process, every core) or ray (Ray Data; pip install 'embcompress\\[ray]'; parquet input).",
)
AddressOpt = typer.Option(
    None, "--address", help="With --engine ray: the address of a running Ray cluster (default: start a local Ray)."
)
ResumeOpt = typer.Option(
    False,
    "--resume",
    help="With --engine ray and a dataset: keep finished shards if the run fails, and on a rerun skip the shards the "
    "manifest lists as done.",
)
ThreadsOpt = typer.Option(
    None,
    "--threads",
    "-j",
    min=1,
    help="Worker threads that decode and compress row groups (default: every core; output is the same for any number).",
)
JsonOpt = typer.Option(False, "--json", help="Print the result as JSON on stdout.")
HnswMOpt = typer.Option(
    None,
    "--hnsw-m",
    min=2,
    help="HNSW graphs: links per node (default 32; fewer: a smaller graph built faster, lower recall).",
)
EfConstructionOpt = typer.Option(
    None,
    "--ef-construction",
    min=1,
    help="HNSW graphs: candidates kept while inserting (default 80; build time grows with it).",
)
EfSearchOpt = typer.Option(
    None, "--ef", min=1, help="HNSW graphs: candidates explored per query (default 128; more: higher recall, slower)."
)


def hnsw_settings(m: int | None, ef_construction: int | None, ef_search: int | None):
    """The graph settings the options give (None when none was given: the library's defaults)."""
    if m is None and ef_construction is None and ef_search is None:
        return None
    from embcompress.search.ann import Hnsw

    return Hnsw.given(m, ef_construction, ef_search)


def graph_text(graph: dict) -> str:
    """A graph's settings as a summary (search --index hnsw, export) prints them."""
    return f"{graph['m']} links per node, ef_construction {graph['ef_construction']}, ef_search {graph['ef_search']}"


def engine_for(engine: str, address: str | None, resume: bool = False):
    """None for the local engine, or the Ray engine (connected now, so a bad address fails first)."""
    if engine == "local":
        if address:
            raise typer.BadParameter("--address is for --engine ray", param_hint="--address")
        if resume:
            raise typer.BadParameter(
                "--resume is for --engine ray (the local engine writes a dataset in one pass)", param_hint="--resume"
            )
        return None
    if engine != "ray":
        raise typer.BadParameter(f"engine must be local or ray, got {engine!r}", param_hint="--engine")
    from embcompress.engines.ray import RayEngine

    return RayEngine(address, resume=resume)


def fail(message: str, code: int = 1) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread like KeyboardInterrupt, so that every ``with`` block
    (writers, worker threads) cleans up on the way out."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def guarded(fn: Callable) -> Callable:
    """Turn library errors into one line on stderr and exit code 1, without a traceback; library
    warnings become one 'warning:' line each on stderr. Usage errors (typer.BadParameter, exit 2)
    pass through to Typer. Ctrl-C exits 130 and SIGTERM 143, after the temporary outputs are
    removed and the worker threads stopped."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            with warnings_to_stderr():
                return fn(*args, **kwargs)
        except EmbcompressError as exc:
            fail(str(exc))
        except PermissionError as exc:
            fail(f"permission denied: {exc.filename or exc}")
        except OSError as exc:
            fail(f"{exc.strerror or exc}{': ' + str(exc.filename) if exc.filename else ''}")
        except KeyboardInterrupt:
            fail("interrupted; no output was written", code=130)
        except Terminated:
            fail("terminated (SIGTERM); no output was written", code=143)

    return wrapper


def takes(request: type) -> Callable[[Callable], Callable]:
    """A command whose options are the fields of the dataclass ``request``, declared there with their
    ``typer.Option``/``typer.Argument`` and in that order. Typer reads them from the signature made
    here; the command's body gets one ``request`` value with the parsed values."""
    hints = typing.get_type_hints(request, include_extras=True)
    params = [
        inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default, annotation=hints[f.name])
        for f in dataclasses.fields(request)
    ]

    def command_of(body: Callable) -> Callable:
        @functools.wraps(body)
        def command(**values: Any) -> Any:
            return body(request(**values))

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return command_of


@contextmanager
def warnings_to_stderr() -> Iterator[None]:
    """Library warnings (e.g. qrels naming unknown ids) as one 'warning:' line each on stderr."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for w in caught:  # ours, not the deprecation notes of libraries (Ray, torch) about their own APIs
                if "site-packages" in w.filename and "embcompress" not in w.filename:
                    continue
                err.print(f"warning: {w.message}", highlight=False)


class Bars:
    """Progress bars on stderr (shown only when stderr is a terminal) for the library's two
    progress callbacks: ``stage(description, total) -> advance(n)`` for passes over rows, and
    ``step(label, i, n)`` for a list of configurations."""

    def __init__(self) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        )
        self._steps = None

    def __enter__(self) -> "Bars":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.__exit__(*exc)

    def stage(self, description: str, total: int | None) -> Callable[[int], None]:
        task = self._progress.add_task(description, total=total)
        return lambda n: self._progress.advance(task, n)

    def step(self, label: str, i: int, n: int) -> None:
        if self._steps is None:
            self._steps = self._progress.add_task(label, total=n)
        self._progress.update(self._steps, completed=i, total=n, description=label)


@contextmanager
def progress_bar(description: str, total: int | None, disable: bool = False) -> Iterator[Callable[[int], None]]:
    """One progress bar on stderr; yields an advance(n) (a no-op when ``disable``)."""
    if disable:
        yield lambda n: None
        return
    with Bars() as bars:
        yield bars.stage(description, total)


def emit(result: dict[str, Any], as_json: bool, table: Table | None = None) -> None:
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2, default=str) + "\n")
    elif table is not None:
        out.print(table)


def split_list(text: str | None, convert: Callable[[str], Any], option: str) -> list | None:
    """A comma-separated option value as a list, or a usage error naming the option."""
    if not text:
        return None
    try:
        return [convert(x.strip()) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated values, got {text!r}", param_hint=option) from None


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
