"""The ids of a plan's tiers kept on disk (embcompress.serving.ids) and read for the results only."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import embcompress
from embcompress.cli.main import app
from embcompress.core.errors import FormatError
from embcompress.serving.ids import DiskIds
from embcompress.serving.plan import Plan, save_plan
from embcompress.serving.tiers import apply_plan, check_tiers, open_tiers
from embcompress.serving.plan import load_plan

N, D = 1500, 24


def _vectors(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D)).astype(np.float32)
    return X, (X[:30] + 0.1 * rng.standard_normal((30, D))).astype(np.float32)


IDS = {
    "string": pa.array([f"doc-{i}-" + "x" * (i % 7) for i in range(N)]),
    "large_string": pa.array([f"é{i}" for i in range(N)], type=pa.large_string()),
    "binary": pa.array([bytes([i % 256, (i * 7) % 256]) * (1 + i % 3) for i in range(N)], type=pa.binary()),
    "int32": pa.array(np.arange(N, dtype=np.int32) * 3 - 100),
    "int64": pa.array(np.arange(N, dtype=np.int64) * 2**40),
}


def _tiers(tmp_path, ids: pa.Array, *, copy="int8"):
    X, Q = _vectors()
    # row groups of 400 rows read in batches of 350: the id columns reach the writer as slices of row groups
    table = pa.table({"id": ids, "embedding": pa.array(list(X), type=pa.list_(pa.float32()))})
    pq.write_table(table, tmp_path / "docs.parquet", row_group_size=400)
    first = embcompress.from_spec("binary").fit(X)
    save_plan(Plan(copy=copy, candidates=40, k=10), first, tmp_path / "plan", copy_model=embcompress.Int8().fit(X))
    apply_plan(tmp_path / "plan", tmp_path / "docs.parquet", tmp_path / "out", batch_size=350)
    return Q


@pytest.mark.parametrize("kind", list(IDS))
def test_served_ids_are_read_from_disk_and_equal_the_codes_files(tmp_path, kind):
    Q = _tiers(tmp_path, IDS[kind])
    served = open_tiers(tmp_path / "out", tmp_path / "plan")
    assert isinstance(served.index.ids, DiskIds)  # no id of the file was read into memory
    got = served.search(Q)
    from_file = open_tiers(tmp_path / "out", tmp_path / "plan", id_column="id")  # the codes' file's own ids
    assert not isinstance(from_file.index.ids, DiskIds)
    want = from_file.search(Q)
    assert np.array_equal(got.rows, want.rows)
    assert got.ids.tolist() == want.ids.tolist() == [[IDS[kind][r].as_py() for r in row] for row in got.rows]
    assert served.index.ids.to_arrow().to_pylist() == IDS[kind].to_pylist()


def test_ids_with_nulls_stay_in_the_codes_file(tmp_path):
    ids = pa.array([None if i % 100 == 7 else f"d{i}" for i in range(N)])
    Q = _tiers(tmp_path, ids)
    doc = json.loads((tmp_path / "out" / "tiers.json").read_text())
    assert doc["ids"] is None and not list((tmp_path / "out").glob("ids*"))
    served = open_tiers(tmp_path / "out", tmp_path / "plan")
    got = served.search(Q)
    assert got.ids.tolist() == [[ids[r].as_py() for r in row] for row in got.rows]


def test_cut_or_missing_ids_files_are_one_line_errors(tmp_path):
    Q = _tiers(tmp_path, IDS["string"])
    out = tmp_path / "out"
    np.save(tmp_path / "q.npy", Q)
    data = (out / "ids.bytes").read_bytes()
    (out / "ids.bytes").write_bytes(data[:-5])
    saved = load_plan(tmp_path / "plan")
    for call in (lambda: open_tiers(out, tmp_path / "plan"), lambda: check_tiers(out, saved)):
        with pytest.raises(FormatError, match="cut or do not belong together"):
            call()
    r = CliRunner().invoke(
        app,
        ["search", str(out), str(tmp_path / "q.npy"), str(tmp_path / "r.parquet"), "--plan", str(tmp_path / "plan")],
    )
    assert r.exit_code != 0 and "ids" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "r.parquet").exists()
    (out / "ids.offsets.npy").unlink()
    with pytest.raises(FormatError, match="missing or cut"):
        open_tiers(out, tmp_path / "plan")


def test_tiers_written_before_the_ids_files_still_serve_their_ids(tmp_path):
    Q = _tiers(tmp_path, IDS["string"])
    out = tmp_path / "out"
    doc = json.loads((out / "tiers.json").read_text())
    (out / "tiers.json").write_text(json.dumps({k: v for k, v in doc.items() if k != "ids"}))
    for name in ("ids.offsets.npy", "ids.bytes"):
        (out / name).unlink()
    got = open_tiers(out, tmp_path / "plan").search(Q)
    assert got.ids.tolist() == [[IDS["string"][r].as_py() for r in row] for row in got.rows]


@pytest.mark.parametrize("kind", ["string", "large_string", "binary", "int32"])
def test_the_writer_takes_slices_at_any_offset_and_refuses_a_short_count(tmp_path, kind):
    from embcompress.serving.ids import IdsWriter

    ids = IDS[kind]
    w = IdsWriter(tmp_path, ids.type, 200)
    for lo, hi in ((0, 0), (0, 37), (37, 38), (38, 150), (150, 200)):
        w.write(ids.slice(lo + 11, hi - lo))  # slices of a longer column: each starts at an offset into its buffers
    doc = w.close()
    assert DiskIds(tmp_path, doc, 200).to_arrow().to_pylist() == ids.slice(11, 200).to_pylist()
    (tmp_path / "short").mkdir()
    short = IdsWriter(tmp_path / "short", ids.type, 5)
    short.write(ids.slice(0, 4))
    with pytest.raises(FormatError, match="holds 4 rows, the input 5"):
        short.close()


def test_a_graphs_missing_result_has_no_id_whatever_keeps_the_ids(tmp_path):
    """A graph pads what it did not find with row -1: its id is None, not the last row's (numpy's -1 index) nor
    an Arrow error, for ids kept on disk, as an Arrow column or as a list."""
    from embcompress.search.index import id_column, ids_at

    _tiers(tmp_path, IDS["string"])
    on_disk = open_tiers(tmp_path / "out", tmp_path / "plan").index.ids
    rows = np.array([[3, -1], [N - 1, 0]])
    want = [["doc-3-xxx", None], [IDS["string"][N - 1].as_py(), "doc-0-"]]
    for ids in (
        on_disk,
        IDS["string"],
        pa.chunked_array([IDS["string"][:7], IDS["string"][7:]]),
        id_column(IDS["string"].to_pylist(), N),
    ):
        assert ids_at(ids, rows).tolist() == want


def test_an_int_ids_file_cut_before_or_while_served_is_a_one_line_error(tmp_path):
    _tiers(tmp_path, IDS["int64"])
    out = tmp_path / "out"
    served = open_tiers(out, tmp_path / "plan")
    data = (out / "ids.npy").read_bytes()
    with open(out / "ids.npy", "r+b") as f:  # another process cuts the file under a running server
        f.truncate(len(data) - 8 * (N // 2))
    with pytest.raises(FormatError, match="cut while served"):
        served.index.ids.at(np.array([N - 1]))
    assert served.index.ids.at(np.array([1, 2])).tolist() == [2**40, 2**41]  # rows still there are read
    with pytest.raises(FormatError, match="missing or cut"):
        open_tiers(out, tmp_path / "plan")
