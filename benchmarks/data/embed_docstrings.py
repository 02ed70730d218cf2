"""A second retrieval set that the codes were not tuned on: the Python standard library's
docstrings (query = summary line, document = the rest of the docstring; each query's own body is
its one relevant document), embedded with the packaged all-MiniLM-L6-v2 and cached in the layout
bench_codes_debian.py reads (corpus.parquet, queries.parquet, qrels.tsv).

    python benchmarks/data/embed_docstrings.py [--limit 5000] [--out bench-data/docstrings]

``--root DIR`` takes the docstrings of the Python sources under DIR instead, e.g. an environment's
site-packages for a larger set (the standard library gives about 2,000 pairs):

    python benchmarks/data/embed_docstrings.py --root "$(python -c 'import numpy, os;
    print(os.path.dirname(os.path.dirname(numpy.__file__)))')" --limit 30000 --out bench-data/docstrings-site

The pairs are kept in OUT/pairs.jsonl.gz; another model embeds the same ones with ``--pairs``:

    python benchmarks/data/embed_docstrings.py --pairs bench-data/docstrings-site/pairs.jsonl.gz --model
    bench-data/models/mpnet-static-256 --out bench-data/docstrings-site/mpnet-static
"""

from __future__ import annotations

import sys

import argparse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
from _util import kept_pairs, load_bench_model

from embcompress.embedding.corpus import stdlib_docstring_pairs
from embcompress.embedding.embed import DEFAULT_MODEL, encode, write_embeddings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--limit", type=int, default=5000)
    ap.add_argument("--out", default="bench-data/docstrings")
    ap.add_argument(
        "--root", default=None, help="Python sources to take docstrings from (default: the standard library)"
    )
    ap.add_argument(
        "--model", default=None, help="a local sentence-transformers directory (default: the packaged MiniLM)"
    )
    ap.add_argument("--max-seq-length", type=int, default=256, help="tokens per text (MiniLM's own setting: 256)")
    ap.add_argument(
        "--pairs",
        default=None,
        help="the docstring pairs as jsonl.gz, written on the first run and read by later "
        "ones (another model embeds the same pairs; default: OUT/pairs.jsonl.gz)",
    )
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pairs = kept_pairs(args.pairs or out / "pairs.jsonl.gz", lambda: stdlib_docstring_pairs(args.limit, root=args.root))
    model = load_bench_model(args.model, args.max_seq_length)
    ids = [p.id for p in pairs]
    for name, texts in (("corpus", [p.document for p in pairs]), ("queries", [p.query for p in pairs])):
        write_embeddings(
            out / f"{name}.parquet",
            ids,
            encode(model, texts),
            model_name=args.model or DEFAULT_MODEL,
            normalized=True,
            overwrite=True,
        )
    (out / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{i}\t{i}\t1\n" for i in ids))
    print(f"{len(pairs)} docstring pairs -> {out}")


if __name__ == "__main__":
    main()
