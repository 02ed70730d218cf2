"""GeoPres and the autoencoder baseline: training does what the paper's loss says."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from embcompress import Autoencoder, GeoPres, InputError, RandomProjection, from_spec
from embcompress.analysis import preservation


def data(n=1500, d=48, r=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, r)) @ rng.standard_normal((r, d)) + 0.1 * rng.standard_normal((n, d))
    return (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)


def distance_mse(X, Z):
    i, j = np.triu_indices(300, 1)
    dx = np.linalg.norm(X[:300][i] - X[:300][j], axis=1)
    dz = np.linalg.norm(Z[:300][i] - Z[:300][j], axis=1)
    return float(((dx - dz) ** 2).mean())


@pytest.fixture(scope="module")
def X():
    return data()


@pytest.fixture(scope="module")
def fitted(X):
    return GeoPres(dim=8, batch_size=256, min_steps=150).fit(X)


def test_training_lowers_the_paper_loss(X, fitted):
    hist = fitted.history_
    assert hist[-1]["val_loss"] < hist[0]["val_loss"] * 0.5
    # beats a random projection of the same width on the objective itself (eq. 1)
    rp = RandomProjection(dim=8).fit(X)
    assert distance_mse(X, fitted.transform(X)) < 0.5 * distance_mse(X, rp.transform(X))
    assert preservation(X, fitted.transform(X)).spearman > preservation(X, rp.transform(X)).spearman


def test_fused_positional_loss_has_autograds_value_and_gradient():
    """The in-place loss with its written-out backward against autograd through the plain
    formulas, in float64, with a duplicate row (a clamped distance) in the batch."""
    torch = pytest.importorskip("torch")
    from embcompress.compressors.geopres import _distances_, distance_matrix, mean_offdiagonal_sq, positional_loss

    g = torch.Generator().manual_seed(0)
    Y = torch.randn(64, 12, generator=g, dtype=torch.float64)
    Y[7] = Y[3]  # a duplicate: its distance is clamped, its gradient zero
    W = torch.randn(5, 12, generator=g, dtype=torch.float64)
    target = _distances_(torch, Y)
    torch.testing.assert_close(target, distance_matrix(torch, Y), rtol=1e-12, atol=1e-9)
    grads = []
    for loss_of in (
        lambda Z: positional_loss(torch, target, Z),
        lambda Z: mean_offdiagonal_sq(torch, target, distance_matrix(torch, Z)),
    ):
        Wg = W.clone().requires_grad_(True)
        loss = loss_of(Y @ Wg.T)
        (3.0 * loss).backward()  # an upstream gradient other than 1
        grads.append((loss.detach(), Wg.grad))
    torch.testing.assert_close(grads[0][0], grads[1][0], rtol=1e-12, atol=0)
    torch.testing.assert_close(grads[0][1], grads[1][1], rtol=1e-9, atol=1e-12)
    assert float(grads[0][1].abs().max()) > 0


def test_best_checkpoint_is_restored(fitted):
    best = min(h["val_loss"] for h in fitted.history_)
    assert [h["step"] for h in fitted.history_ if h["val_loss"] == best][0] == fitted.best_step_
    assert fitted.device_used_ == "cpu"


def test_early_stopping_stops(X):
    # a learning rate far too small makes no progress: patience ends the run before min_steps
    g = GeoPres(dim=8, batch_size=128, min_steps=400, lr=1e-9, patience=2, warmup=0.0).fit(X)
    assert g.history_[-1]["step"] < 400


def test_angular_and_rank_losses_train(X):
    for loss in ("angular", "rank"):
        g = GeoPres(dim=8, loss=loss, batch_size=256, min_steps=60).fit(X)
        assert g.history_[-1]["val_loss"] < g.history_[0]["val_loss"]


def test_autoencoder_reconstruction_improves(X):
    a = Autoencoder(dim=8, batch_size=256, min_steps=100).fit(X)
    assert a.history_[-1]["val_loss"] < a.history_[0]["val_loss"]
    assert (a.transform(X) >= 0).all()  # ReLU encoder


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dim": 48}, "allowed is 1..47"),
        ({"dim": 8, "loss": "cosine"}, "positional, angular, rank"),
        ({"dim": 8, "lr": 0}, "lr must be a positive number"),
        ({"dim": 8, "batch_size": 1}, "batch_size must be"),
        ({"dim": 8, "device": "cuda"}, "CUDA is not available"),
    ],
)
def test_bad_parameters_fail_before_training(X, kwargs, message):
    with pytest.raises(InputError, match=message):
        GeoPres(min_steps=2, **kwargs).fit(X)


def test_too_few_rows():
    with pytest.raises(InputError, match="at least 20 rows"):
        GeoPres(dim=2).fit(data(10, 8, 2))


def test_reservoir_sample_bounds_training_rows(X):
    g = GeoPres(dim=4, max_rows=100, batch_size=32, min_steps=5).fit(X)
    assert g.transform(X).shape == (len(X), 4)


def test_transform_and_import_need_no_torch(tmp_path, fitted):
    fitted.save(tmp_path / "g")
    code = (
        "import sys, numpy as np, embcompress; c = embcompress.load(sys.argv[1]); "
        "c.transform(np.ones((2, 48), dtype=np.float32)); sys.exit(1 if 'torch' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code, str(tmp_path / "g")]).returncode == 0


@pytest.mark.parametrize("loss", ["positional", "angular"])
def test_maps_fitted_together_are_the_maps_fitted_alone(X, loss):
    """Three widths trained side by side on shared batch targets: each model, its history and its
    best step are exactly those of its fit alone, though they stop early at different steps;
    a sample (max_rows) is drawn once for all as each would draw it."""
    from embcompress.compressors import fit_together

    specs = [f"geopres:{w}:loss={loss},batch_size=128,min_steps=60,max_rows=1200" for w in (24, 8, 2)]
    alone = [from_spec(s).fit(X) for s in specs]
    joint = [from_spec(s) for s in specs]
    fit_together(joint, X)
    for a, b in zip(alone, joint):
        np.testing.assert_array_equal(b.components_, a.components_)
        assert b.best_step_ == a.best_step_ and b.n_features_in_ == a.n_features_in_
        assert [h["val_loss"] for h in b.history_] == [h["val_loss"] for h in a.history_]
    if loss == "positional":
        assert len({len(a.history_) for a in alone}) > 1  # they did stop at different steps


def test_fit_together_refuses_what_cannot_share_batches(X):
    from embcompress.compressors import fit_together

    for comps in (
        [GeoPres(dim=4), GeoPres(dim=4, lr=0.1)],
        [GeoPres(dim=4), Autoencoder(dim=4)],
        [GeoPres(dim=4, loss="rank"), GeoPres(dim=2, loss="rank")],
        [GeoPres(dim=4)],
    ):
        with pytest.raises(InputError, match="two or more maps of one joint_fit_key"):
            fit_together(comps, X)
    with pytest.raises(InputError, match="dim=480 is out of range"):  # before any training
        fit_together([GeoPres(dim=4, min_steps=2), GeoPres(dim=480, min_steps=2)], X)
    with pytest.raises(InputError, match="at least 20 rows"):
        fit_together([GeoPres(dim=2), GeoPres(dim=1)], data(10, 8, 2))


def test_chain_geopres_then_binary(X):
    c = from_spec("geopres:16:batch_size=256,min_steps=20+binary").fit(X)
    assert c.transform(X).shape == (len(X), 2)


def test_training_holds_torch_to_the_idle_cores_and_restores_it(X, monkeypatch):
    """Beside a busy core the team is held to the idle cores (its barriers spin); the model is the
    same on 1 thread as on 2, and torch's own setting is back afterwards. The validation loss is computed on
    one thread: a float32 reduction, it rounded differently on 1 and 2 (2.6e-7 apart), so the history (and
    the joint-fit test, once beside a busy core) depended on the machine's load."""
    import torch

    from embcompress.compressors import _learned

    seen = []
    real_loss = GeoPres._loss

    def spy(self, torch_, model, Y, target):
        seen.append(torch_.get_num_threads())
        return real_loss(self, torch_, model, Y, target)

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        monkeypatch.setattr(GeoPres, "_loss", spy)
        fits = {}
        for idle in (1, 2):
            monkeypatch.setattr(_learned, "idle_cores", lambda idle=idle: idle)
            seen.clear()
            fits[idle] = GeoPres(dim=8, batch_size=256, min_steps=40).fit(X)
            assert idle in seen and set(seen) <= {1, idle}  # training on the idle cores, validation on one
            assert torch.get_num_threads() == 2
        np.testing.assert_array_equal(fits[1].components_, fits[2].components_)
        assert [h["val_loss"] for h in fits[1].history_] == [h["val_loss"] for h in fits[2].history_]
        monkeypatch.setattr(_learned, "idle_cores", lambda: None)  # not measurable: torch's own count
        seen.clear()
        GeoPres(dim=8, batch_size=256, min_steps=8).fit(X)
        assert set(seen) == {1, 2}  # training on torch's 2, validation on one
    finally:
        torch.set_num_threads(before)


def test_idle_cores_from_tick_counts():
    from embcompress.core._parallel import idle_cores, idle_of

    # 2 cores, 200 ticks over the window: another process busy on one core, ours idle
    assert idle_of(busy=100, total=200, own=0, machine_cpus=2, cpus=2) == 1
    assert idle_of(busy=100, total=200, own=100, machine_cpus=2, cpus=2) == 2  # the busy one was us
    assert idle_of(busy=200, total=200, own=0, machine_cpus=2, cpus=2) == 1  # at least one
    assert idle_of(busy=0, total=800, own=0, machine_cpus=8, cpus=2) == 2  # at most our own cores
    assert idle_of(busy=300, total=800, own=0, machine_cpus=8, cpus=4) == 4
    assert idle_of(busy=0, total=0, own=0, machine_cpus=2, cpus=2) is None
    n = idle_cores()
    assert n is None or 1 <= n <= len(__import__("os").sched_getaffinity(0))
