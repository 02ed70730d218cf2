from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


def make_vectors(n: int = 500, d: int = 48, seed: int = 0, normalize: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    if normalize:
        X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X


def write_parquet(path, X, *, kind: str = "fixed", dtype=pa.float32(), ids=True, extra=None, row_group_size=None):
    """Write vectors as fixed_size_list (kind='fixed') or list (kind='list') of ``dtype``."""
    flat = pa.array(np.asarray(X).reshape(-1), type=dtype) if isinstance(X, np.ndarray) else None
    if kind == "fixed":
        col = pa.FixedSizeListArray.from_arrays(flat, X.shape[1])
    elif kind == "list":
        col = (
            pa.array([list(map(float, r)) for r in X], type=pa.list_(dtype))
            if not isinstance(X, np.ndarray)
            else pa.ListArray.from_arrays(pa.array(np.arange(0, X.size + 1, X.shape[1], dtype=np.int32)), flat)
        )
    else:
        raise ValueError(kind)
    cols = {}
    if ids:
        cols["id"] = pa.array([f"doc{i}" for i in range(len(col))])
    for k, v in (extra or {}).items():
        cols[k] = pa.array(v)
    cols["embedding"] = col
    pq.write_table(pa.table(cols), path, row_group_size=row_group_size)
    return path


@pytest.fixture(autouse=True)
def _steady_torch_threads(monkeypatch):
    """Every fit of a learned map on the same thread count: a fit takes the cores idle when it starts
    (compressors._learned.train), and torch rounds differently on another count, so two fits that a test compares
    to the bit differed by 1.5e-7 once a neighbour kept a core busy. A test of that choice patches it again."""
    from embcompress.compressors import _learned

    monkeypatch.setattr(_learned, "idle_cores", lambda: None)


@pytest.fixture
def X():
    return make_vectors()


@pytest.fixture
def vec_file(tmp_path, X):
    return write_parquet(tmp_path / "vectors.parquet", X, extra={"lang": ["en"] * len(X)}, row_group_size=128)


@pytest.fixture(scope="session")
def s3():
    """An S3 endpoint on localhost (moto's server) with a bucket; the URI prefix of the bucket,
    with credentials and endpoint in the URI as pyarrow reads them, and its pyarrow filesystem."""
    server = pytest.importorskip("moto.server")
    from pyarrow import fs as pafs

    srv = server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    opts = f"endpoint_override={host}:{port}&scheme=http&region=us-east-1"
    fs = pafs.S3FileSystem(
        access_key="test",
        secret_key="test",
        endpoint_override=f"{host}:{port}",
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=True,
    )
    fs.create_dir("bkt")
    yield (lambda path: f"s3://test:test@bkt/{path}?{opts}"), fs
    srv.stop()


def s3_objects(fs, prefix: str = "bkt") -> list[str]:
    """The objects (files) under ``prefix`` on the test S3 server, sorted."""
    from pyarrow import fs as pafs

    return sorted(
        i.path for i in fs.get_file_info(pafs.FileSelector(prefix, recursive=True)) if i.type == pafs.FileType.File
    )


def clustered_unit(n: int = 3000, d: int = 48, seed: int = 0) -> np.ndarray:
    """Unit vectors in 30 clusters with a decaying spectrum and an offset, like real embeddings."""
    rng = np.random.default_rng(seed)
    spectrum = np.linspace(1, 0.1, d)
    centers = rng.standard_normal((30, d)) * spectrum
    X = centers[rng.integers(0, 30, n)] + rng.standard_normal((n, d)) * 0.6 * spectrum + 0.1
    return (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def code_data():
    """The code families' tests' set: documents, and queries that are noisy copies of some of them."""
    D = clustered_unit()[200:]
    rng = np.random.default_rng(5)
    Q = D[rng.choice(len(D), 200, replace=False)] + 0.02 * rng.standard_normal((200, 48)).astype(np.float32)
    return D, Q


def code_recall(found, exact) -> float:
    """The share of each query's exact top rows that were found, averaged over the queries."""
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(found, exact)]))
