"""Do label-free picks match the task? For each judged set and budget, every candidate of
``recommend`` is fitted and searched once (2-fold, out-of-sample) and scored from the same search
results both ways: judged (nDCG@10 against the qrels) and label-free (the user's real queries
scored against float search's ranking of them, read as each of the references ``top1``, ``graded``
and ``recall``). Then the picks: the judged one (best judged retention) and, per reference, the
one ``recommend`` makes without judgments (the label-free leader). Printed per row: the set, the
budget, both picks and the judged nDCG@10 retention of each, and the Spearman correlation of
each reference's retentions with the judged ones across the candidates.

    python benchmarks/choosing/bench_label_free.py --emb bench-data/debian-ir --qrels
    ../shared/data/debian-ir/qrels.tsv.gz \\
        --name Debian --budgets 48,24,12 [--sample 20000] [--queries 2000] [--model MiniLM] [--json out.json]
    python benchmarks/choosing/bench_label_free.py --table benchmarks/results/label-free-*.json [--readme
    benchmarks/README.md]

``--table`` prints the agreement table of the runs' JSON (set, model, budget, the judged pick, the
label-free pick with the default reference, both judged nDCG@10 retentions), or writes it into
benchmarks/README.md between ``<!-- label-free-table -->`` and ``<!-- /label-free-table -->``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from embcompress.analysis import spearman
from embcompress.io.datasets import read_qrels
from embcompress.evaluation.evaluate import run_configs
from embcompress.evaluation.tasks import REFERENCES, LabelFreeTask, Measured, QrelsTask
from embcompress.io import read_all
from embcompress.report.candidates import candidates
from embcompress.report.task_files import judged_subset
from embcompress.report.recommend import choose_winner
from embcompress.report.uncertainty import uncertainty


class BothTask:
    """One search per configuration, scored judged (the main figure) and label-free under every
    reference; the label-free figures go in ``metrics`` and ``side`` (per query)."""

    def __init__(self, Q, qids, qrels, k: int = 10):
        self.judged = QrelsTask(Q, qids, qrels, k)
        self.free = {ref: LabelFreeTask(Q, k, reference=ref, source="queries") for ref in REFERENCES}
        self.metric, self.mode, self.source = self.judged.metric, "qrels", "queries"
        self.queries, self.query_ids, self.k = self.judged.queries, self.judged.query_ids, k
        self.side: dict[str, dict[str, np.ndarray]] = {}

    def check(self, docs, doc_ids):
        return self.judged.check(docs, doc_ids)

    def measure(self, index, cfg, originals) -> Measured:
        m = self.judged.measure(index, cfg, originals)
        extra = {}
        for ref, task in self.free.items():
            f = task.measure(index, cfg, originals)  # the same search again: cheap beside the fit
            extra[f"free_{ref}"] = f.score
            self.side.setdefault(cfg.label, {})[ref] = f.per_query
        return Measured(m.score, {**m.metrics, **extra}, m.seconds, m.queries, m.candidates, m.per_query)


def picks(rows, free_ref: dict, ref_scores: dict, label_free_ref: str | None, tie: float = 16.0):
    """The winner as recommend picks it from ``rows`` (judged when ``label_free_ref`` is None)."""
    ranked = [dict(r) for r in rows]
    if label_free_ref is None:
        key = "retention"
    else:
        key = f"free_{label_free_ref}_retention"
        for r in ranked:
            r["retention"] = r[key]
    ranked.sort(key=lambda r: (-r["retention"], r["bytes_per_vector"], r["config"]))
    per = {
        r["config"]: (r["per_query"] if label_free_ref is None else free_ref[r["config"]][label_free_ref])
        for r in ranked
    }
    notes = uncertainty(ranked, per, ref_scores[label_free_ref], ranked[0]["config"], tie_percentile=tie)
    ranked = [{**r, "too_slow": None, **notes[r["config"]]} for r in ranked]
    winner, _ = choose_winner(ranked, label_free_ref is not None, None)
    return winner["config"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", nargs="+", default=None, help="JSON of earlier runs: print their agreement table")
    ap.add_argument("--readme", default=None, help="with --table: write it between the markers of this file")
    ap.add_argument("--emb", help="folder with corpus.parquet and queries.parquet")
    ap.add_argument("--qrels")
    ap.add_argument("--name")
    ap.add_argument("--model", default="MiniLM", help="the embedding model's name, for the JSON and the table")
    ap.add_argument("--budgets", default="48,24,12")
    ap.add_argument(
        "--sample", type=int, default=20000, help="documents: the judged ones of sampled queries and others"
    )
    ap.add_argument("--queries", type=int, default=2000, help="a seeded sample of the queries")
    ap.add_argument("--configs", default=None, help="only these candidates, comma-separated")
    ap.add_argument(
        "--exclude",
        default="",
        help="leave out candidates with a stage of these families, comma-separated "
        "(e.g. rq,opq: their faiss fits take minutes, far longer on a shared machine)",
    )
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.table:
        return agreement(args.table, args.readme)
    if not (args.emb and args.qrels and args.name):
        ap.error("--emb, --qrels and --name are required to measure (or --table to tabulate)")
    emb = Path(args.emb)
    D, dids = read_all(emb / "corpus.parquet")
    Q, qids = read_all(emb / "queries.parquet")
    qrels = read_qrels(args.qrels)
    if args.sample and args.sample < len(D):
        rows, keep_q, qrels, _ = judged_subset(dids, qids, qrels, args.sample)
        D, dids = D[rows], [dids[i] for i in rows]
        Q, qids = Q[keep_q], [qids[i] for i in keep_q]
    if args.queries and args.queries < len(Q):
        sel = np.sort(np.random.default_rng(0).choice(len(Q), args.queries, replace=False))
        Q, qids = Q[sel], [qids[i] for i in sel]
    print(f"{args.name}: {len(D):,} documents, {len(Q):,} queries ({time.strftime('%Y-%m-%d')})", flush=True)
    out = []
    for budget in (int(b) for b in args.budgets.split(",")):
        t0 = time.perf_counter()
        configs = args.configs.split(",") if args.configs else [c.config for c in candidates(D.shape[1], budget)]
        drop = {f for f in args.exclude.split(",") if f}
        configs = [c for c in configs if not {st.split(":")[0] for st in c.split("@")[0].split("+")} & drop]
        task = BothTask(Q, qids, qrels)
        rows = [
            r.to_dict(per_query=True)
            for r in run_configs(D, task, ["float", *configs], doc_ids=dids, folds=2, per_query=True)
        ]
        ref, found = rows[0], rows[1:]
        ref_scores = {None: ref["score"], **{r: ref[f"free_{r}"] for r in REFERENCES}}
        for r in found:
            for name in REFERENCES:
                r[f"free_{name}_retention"] = r[f"free_{name}"] / ref_scores[name]
        judged_pick = picks(found, task.side, ref_scores, None)
        by = {r["config"]: r for r in found}
        line = {
            "set": args.name,
            "model": args.model,
            "documents": len(D),
            "queries": len(Q),
            "date": time.strftime("%Y-%m-%d"),
            "budget": budget,
            "judged_pick": judged_pick,
            "judged": by[judged_pick]["retention"],
            "seconds": round(time.perf_counter() - t0),
        }
        for name in REFERENCES:
            p = picks(found, task.side, ref_scores, name)
            rho = spearman(
                np.array([r["retention"] for r in found]), np.array([r[f"free_{name}_retention"] for r in found])
            )
            line.update({f"{name}_pick": p, f"{name}_judged": by[p]["retention"], f"{name}_spearman": float(rho)})
        out.append({**line, "rows": [{k: v for k, v in r.items() if k != "per_query"} for r in found]})
        print(
            f"  {budget:3d} B  judged pick {judged_pick} {100 * line['judged']:.2f}%  |  "
            + "  |  ".join(
                f"{n}: {line[n + '_pick']} {100 * line[n + '_judged']:.2f}% "
                f"({100 * (line[n + '_judged'] - line['judged']):+.2f}), rho {line[n + '_spearman']:.2f}"
                for n in REFERENCES
            )
            + f"  [{line['seconds']} s]",
            flush=True,
        )
        if args.json:  # after every budget, so a stopped run keeps what it measured
            Path(args.json).write_text(json.dumps(out, indent=1, default=float))


def agreement(paths: list[str], readme: str | None) -> None:
    """The agreement table of earlier runs: per set, model and budget, the judged pick and the
    label-free pick (default reference), with the judged nDCG@10 retention of each."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _util and the other groups' modules
    from _util import write_between

    from embcompress.evaluation.tasks import DEFAULT_REFERENCE

    ref = DEFAULT_REFERENCE
    lines = [
        "| set | model | budget | documents / queries | judged pick | label-free pick (float top-1) | difference |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in paths:
        for b in json.loads(Path(p).read_text()):
            diff = 100 * (b[f"{ref}_judged"] - b["judged"])
            lines.append(
                f"| {b['set']} | {b.get('model', 'MiniLM')} | {b['budget']} B | {b.get('documents', 0):,} / "
                f"{b.get('queries', 0):,} | `{b['judged_pick']}` {100 * b['judged']:.2f}% | `{b[ref + '_pick']}` "
                f"{100 * b[ref + '_judged']:.2f}% | "
                f"{diff:+.2f}{'' if diff >= -0.3 else ' (misses 0.3 by ' + f'{-diff - 0.3:.2f})'} |"
            )
    text = "\n".join(lines)
    if readme:
        write_between(readme, "<!-- label-free-table -->", "<!-- /label-free-table -->", text)
        print(f"{readme}: label-free table of {len(paths)} run(s) written")
    else:
        print(text)


if __name__ == "__main__":
    sys.exit(main())
