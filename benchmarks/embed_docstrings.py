"""A second retrieval set that the codes were not tuned on: the Python standard library's
docstrings (query = summary line, document = the rest of the docstring; each query's own body is
its one relevant document), embedded with the packaged all-MiniLM-L6-v2 and cached in the layout
bench_codes_debian.py reads (corpus.parquet, queries.parquet, qrels.tsv).

    python benchmarks/embed_docstrings.py [--limit 5000] [--out bench-data/docstrings]

``--root DIR`` takes the docstrings of the Python sources under DIR instead, e.g. an environment's
site-packages for a larger set (the standard library gives about 2,000 pairs):

    python benchmarks/embed_docstrings.py --root "$(python -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))')" --limit 30000 --out bench-data/docstrings-site
"""

from __future__ import annotations

import argparse
from pathlib import Path

from embcompress.corpus import stdlib_docstring_pairs
from embcompress.embed import DEFAULT_MODEL, encode, load_model, write_embeddings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--limit", type=int, default=5000)
    ap.add_argument("--out", default="bench-data/docstrings")
    ap.add_argument("--root", default=None, help="Python sources to take docstrings from (default: the standard library)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pairs = stdlib_docstring_pairs(args.limit, root=args.root)
    model = load_model(None)
    ids = [p.id for p in pairs]
    for name, texts in (("corpus", [p.document for p in pairs]), ("queries", [p.query for p in pairs])):
        write_embeddings(out / f"{name}.parquet", ids, encode(model, texts), model_name=DEFAULT_MODEL, normalized=True,
                         overwrite=True)
    (out / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{i}\t{i}\t1\n" for i in ids))
    print(f"{len(pairs)} docstring pairs -> {out}")


if __name__ == "__main__":
    main()
