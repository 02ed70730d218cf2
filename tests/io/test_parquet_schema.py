"""The footer rewrite knows every field pyarrow writes in the columns it carries: a guard that
fails when a pyarrow release starts writing one it does not know (a page index, bloom filters), and
the writer refuses such a column rather than leave an offset pointing at the wrong bytes."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from embcompress.io import schema, thrift, writers
from embcompress.io.schema import ColumnChunk, ColumnMetaData, FileMetaData, RowGroup


def _carried() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([f"doc-{i}" for i in range(50)]),
            "n": pa.array(np.arange(50)),
            "score": pa.array(np.linspace(0, 1, 50)),
        }
    )


def _chunks(data: bytes):
    group = thrift.get(writers._footer(data), FileMetaData.ROW_GROUPS).value.items[0]
    return thrift.get(group, RowGroup.COLUMNS).value.items


def _unknown(data: bytes) -> list[str]:
    out = []
    for cc in _chunks(data):
        out += [f"ColumnChunk {i}" for i in schema.unknown_fields(ColumnChunk, cc)]
        out += [
            f"ColumnMetaData {i}"
            for i in schema.unknown_fields(ColumnMetaData, thrift.get(cc, ColumnChunk.META_DATA).value)
        ]
    return out


@pytest.mark.parametrize("compression", [None, "zstd", "snappy"])
def test_pyarrow_writes_only_fields_the_rewrite_knows(compression):
    # the bytes the writer copies its carried columns from, made as it makes them
    assert _unknown(writers._parquet_bytes(_carried(), compression)) == []


def test_the_guard_sees_a_page_index_and_a_bloom_filter():
    sink = pa.BufferOutputStream()
    pq.write_table(_carried(), sink, write_page_index=True)
    found = _unknown(sink.getvalue().to_pybytes())
    assert f"ColumnChunk {int(ColumnChunk.OFFSET_INDEX_OFFSET)}" in found
    assert f"ColumnChunk {int(ColumnChunk.COLUMN_INDEX_OFFSET)}" in found


def test_writer_refuses_a_carried_column_with_an_unknown_field(tmp_path, monkeypatch):
    def with_page_index(table, compression):
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression=compression or "none", write_page_index=True)
        return sink.getvalue().to_pybytes()

    from embcompress.core.specs import float_spec
    from embcompress.io import VectorWriter

    X = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    carried = pa.RecordBatch.from_arrays([pa.array([str(i) for i in range(50)])], names=["id"])
    monkeypatch.setattr(writers, "_parquet_bytes", with_page_index)
    with pytest.raises(ValueError, match="footer rewrite does not know"):
        with VectorWriter(
            tmp_path / "out.parquet", float_spec(8), column="embedding", carried_schema=carried.schema, num_rows=50
        ) as w:
            w.write(X, carried)
    assert not (tmp_path / "out.parquet").exists()


def test_offsets_are_moved_and_the_file_reads_back(tmp_path):
    from embcompress.core.specs import float_spec
    from embcompress.io import VectorWriter

    X = np.random.default_rng(1).standard_normal((300, 8)).astype(np.float32)
    ids = [f"doc-{i}" for i in range(300)]
    carried = pa.RecordBatch.from_arrays([pa.array(ids)], names=["id"])
    path = tmp_path / "out.parquet"
    with VectorWriter(path, float_spec(8), column="embedding", carried_schema=carried.schema, num_rows=300) as w:
        for s in range(0, 300, 100):
            w.write(X[s : s + 100], carried.slice(s, 100))
    t = pq.read_table(path)
    assert t.column("id").to_pylist() == ids
    np.testing.assert_array_equal(np.stack(t.column("embedding").to_numpy(zero_copy_only=False)), X)
    md = pq.ParquetFile(path).metadata
    for g in range(md.num_row_groups):  # each carried chunk lies before its group's codes, after the last group
        rg = md.row_group(g)
        assert 4 <= rg.column(0).data_page_offset < rg.column(1).data_page_offset


def test_no_bare_field_ids_outside_the_schema_module():
    # thrift.Field / get / put / header lookups take a named field, never an int literal
    root = Path(schema.__file__).parent
    offenders = []
    for path in root.glob("*.py"):
        if path.name in ("schema.py", "thrift.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            args = node.args
            if (
                name == "Field"
                and args[:1]
                or name in ("get", "put")
                and len(args) >= 2
                and isinstance(f, ast.Attribute)
                and getattr(f.value, "id", "") == "thrift"
            ):
                fid = args[0] if name == "Field" else args[1]
                if isinstance(fid, ast.Constant) and isinstance(fid.value, int):
                    offenders.append(f"{path.name}:{node.lineno}")
            if (
                name == "get"
                and isinstance(f, ast.Attribute)
                and getattr(f.value, "id", "") in ("header", "sub", "fields")
                and args
                and isinstance(args[0], ast.Constant)
                and isinstance(args[0].value, int)
            ):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
