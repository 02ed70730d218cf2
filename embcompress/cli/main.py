"""Entry point of the ``embcompress`` command."""

from __future__ import annotations

import typer

from .._version import __version__

from . import analysis, compress, files, recommend, search, train

app = typer.Typer(
    name="embcompress",
    help="Post-training compression of embeddings: binarize, truncate, PCA, int8 and chains, on parquet "
    "vector dumps larger than memory, and what each keeps of retrieval quality.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"embcompress {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    pass


for group in (compress, files, search, analysis, recommend, train):  # one module per command group
    app.add_typer(group.app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
