"""What the faiss-backed families (pq, opq, rq) set in faiss while they train: OpenMP waiting and the BLAS
threshold, restored after."""

from __future__ import annotations

import numpy as np
import pytest

from embcompress import from_spec


faiss = pytest.importorskip("faiss")


@pytest.mark.parametrize("user", [None, "active"])
def test_faiss_openmp_waits_passively_unless_the_user_says_otherwise(user):
    """faiss's OpenMP runtime, loaded through embcompress, sleeps between parallel regions (the
    runtime reports its settings at load with OMP_DISPLAY_ENV); a user's OMP_WAIT_POLICY wins; the
    environment is as it was after the import."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env["OMP_DISPLAY_ENV"] = "TRUE"
    if user:
        env["OMP_WAIT_POLICY"] = user
    code = (
        "import os; from embcompress.core._util import require; require('faiss', 'faiss', 'test'); "
        "print('after:', os.environ.get('OMP_WAIT_POLICY'))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    shown = [
        line.strip() for line in (out.stderr + out.stdout).splitlines() if line.strip().startswith("OMP_WAIT_POLICY")
    ]
    assert shown, out.stderr[-2000:]
    assert shown[0] == ("OMP_WAIT_POLICY = 'ACTIVE'" if user else "OMP_WAIT_POLICY = 'PASSIVE'")
    assert f"after: {user}" in out.stdout


@pytest.mark.parametrize(
    "spec, cls", [("pq:8", "ProductQuantizer"), ("opq:8", "OPQMatrix"), ("rq:4", "ResidualQuantizer")]
)
def test_faiss_trainings_compute_distances_by_blas_and_restore_the_threshold(spec, cls, monkeypatch):
    """faiss's k-means uses its own distance loop below ``distance_compute_blas_threshold`` (128,000
    rows x dims in faiss 1.15), ten times slower than BLAS on PQ's small sub-spaces; our trainings
    run with FAISS_BLAS_FROM, and the process's own threshold is back after the fit."""
    from embcompress.core._util import FAISS_BLAS_FROM

    seen = []
    train = getattr(faiss, cls).train

    def spy(self, *args, **kwargs):
        seen.append(faiss.cvar.distance_compute_blas_threshold)
        return train(self, *args, **kwargs)

    monkeypatch.setattr(getattr(faiss, cls), "train", spy)
    before = faiss.cvar.distance_compute_blas_threshold
    faiss.cvar.distance_compute_blas_threshold = 777  # a user's own setting
    try:
        X = np.random.default_rng(0).standard_normal((600, 32)).astype(np.float32)
        from_spec(spec).fit(X)
        assert seen and set(seen) == {FAISS_BLAS_FROM}
        assert faiss.cvar.distance_compute_blas_threshold == 777
    finally:
        faiss.cvar.distance_compute_blas_threshold = before


def test_faiss_blas_threshold_is_restored_when_the_last_of_overlapping_trainings_ends():
    """Trainings on two threads that overlap: the threshold stays set until the last one ends, then
    is what it was before the first (faiss holds it in one global)."""
    import threading
    import types

    from embcompress.core._util import FAISS_BLAS_FROM, faiss_blas_distances

    fake = types.SimpleNamespace(cvar=types.SimpleNamespace(distance_compute_blas_threshold=5))
    first_in, second_out = threading.Event(), threading.Event()
    during = []

    def first():
        with faiss_blas_distances(fake):
            first_in.set()
            second_out.wait(5)
            during.append(fake.cvar.distance_compute_blas_threshold)  # the second ended before this one

    t = threading.Thread(target=first)
    t.start()
    first_in.wait(5)
    with faiss_blas_distances(fake):
        during.append(fake.cvar.distance_compute_blas_threshold)
    second_out.set()
    t.join(5)
    assert during == [FAISS_BLAS_FROM, FAISS_BLAS_FROM]
    assert fake.cvar.distance_compute_blas_threshold == 5
