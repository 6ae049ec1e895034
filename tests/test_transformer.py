"""Tests for the decoder-only transformer of notebook 10 (mllm_utils.transformer)."""

import pickle

import pytest
import torch

from mllm_utils import chardata, charlstm, checkpoints
from mllm_utils.generation import generate, generate_refeed
from mllm_utils.transformer import TransformerLM, load_model, save_model, shipped_checkpoint_path, train

V = 11


def small_model(seed=0, **kwargs):
    torch.manual_seed(seed)
    config = {"embed_dim": 16, "num_heads": 4, "num_layers": 2, "context_len": 24, **kwargs}
    return TransformerLM(V, **config).eval()


def test_shapes_of_logits_and_cache():
    model = small_model()
    x = torch.randint(V, (3, 7))
    logits, cache = model(x)
    assert logits.shape == (3, 7, V)
    assert len(cache) == 2
    for keys, values in cache:
        assert keys.shape == values.shape == (3, 4, 7, 4)  # (B, heads, T, head_dim)
    logits, cache = model(torch.randint(V, (3, 2)), state=cache)
    assert logits.shape == (3, 2, V) and cache[0][0].shape == (3, 4, 9, 4)


def test_cache_gives_the_same_logits_as_the_full_recompute():
    model = small_model(seed=1)
    x = torch.randint(V, (2, 20))
    with torch.no_grad():
        full, _ = model(x)
        logits, state = model(x[:, :5])  # a prompt, then one token at a time
        steps = [logits]
        for t in range(5, 20):
            logits, state = model(x[:, t : t + 1], state=state)
            steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)


def test_generate_with_cache_equals_generate_refeed():
    model = small_model(seed=2)
    prompt = torch.randint(V, (2, 3))
    fast = generate(model, prompt, 18, greedy=True)
    slow = generate_refeed(model, prompt, 18, greedy=True)
    assert torch.equal(fast, slow)
    fast = generate(model, prompt, 18, top_k=4, generator=torch.Generator().manual_seed(0))
    slow = generate_refeed(model, prompt, 18, top_k=4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(fast, slow)


@pytest.mark.parametrize("t", [0, 5, 11])
def test_causal_output_at_t_does_not_depend_on_later_inputs(t):
    model = small_model(seed=3)
    x = torch.randint(V, (2, 12))
    changed = x.clone()
    changed[:, t + 1 :] = (changed[:, t + 1 :] + 1) % V
    with torch.no_grad():
        a, _ = model(x)
        b, _ = model(changed)
    torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1])
    if t + 1 < 12:  # and the later positions do see the change (the test could fail)
        assert not torch.allclose(a[:, t + 1 :], b[:, t + 1 :])


def test_position_matters():
    model = small_model(seed=4)
    x = torch.tensor([[3, 3, 3, 3]])
    with torch.no_grad():
        logits, _ = model(x)
    assert not torch.allclose(logits[0, 0], logits[0, 3])


def test_attention_weights_are_causal_and_sum_to_one():
    model = small_model(seed=5)
    with torch.no_grad():
        _, _, weights = model(torch.randint(V, (2, 6)), need_weights=True)
    assert len(weights) == 2
    for w in weights:
        assert w.shape == (2, 4, 6, 6)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 6))
        assert torch.all(w.triu(diagonal=1) == 0)


def test_too_long_input_is_a_clear_error():
    model = small_model()
    with pytest.raises(ValueError, match="context_len=24"):
        model(torch.randint(V, (1, 25)))
    _, state = model(torch.randint(V, (1, 20)))
    with pytest.raises(ValueError, match="20 cached \\+ 5 new"):
        model(torch.randint(V, (1, 5)), state=state)
    model(torch.randint(V, (1, 4)), state=state)  # exactly context_len is fine


@pytest.mark.parametrize(
    ("x", "error", "match"),
    [
        (torch.randint(V, (5,)), ValueError, "x.unsqueeze\\(0\\)"),
        (torch.randint(V, (1, 2, 3)), ValueError, "\\(batch, seq_len\\)"),
        (torch.rand(1, 4), TypeError, "integer token ids"),
        (torch.zeros(1, 0, dtype=torch.long), ValueError, "empty"),
        (torch.tensor([[1, V]]), ValueError, f"\\[0, {V}\\)"),
        (torch.tensor([[-1, 2]]), ValueError, f"\\[0, {V}\\)"),
    ],
)
def test_bad_input_is_a_clear_error(x, error, match):
    with pytest.raises(error, match=match):
        small_model()(x)


def test_bad_state_is_a_clear_error():
    model = small_model()
    _, state = model(torch.randint(V, (2, 3)))
    with pytest.raises(ValueError, match="one \\(keys, values\\) pair per block"):
        model(torch.randint(V, (2, 1)), state=state[:1])
    with pytest.raises(ValueError, match="batch sizes must match"):
        model(torch.randint(V, (3, 1)), state=state)


@pytest.mark.parametrize(
    "kwargs", [{"embed_dim": 10, "num_heads": 4}, {"context_len": 0}, {"dropout": 1.0}, {"num_layers": 0}]
)
def test_bad_config_is_a_clear_error(kwargs):
    with pytest.raises(ValueError):
        TransformerLM(V, **kwargs)


def test_train_lowers_the_loss_and_checkpoints(tmp_path):
    torch.manual_seed(0)
    text = torch.tensor([1, 2, 3, 4, 5, 6] * 200)
    model = TransformerLM(V, embed_dim=16, num_heads=2, num_layers=1, context_len=16)
    path = tmp_path / "t.pt"
    logs = []
    ck = train(model, text, text[:300], [chardata.UNK, *"abcdefghij"], path, steps=40, batch_size=8,
               lr=1e-2, warmup=5, eval_every=20, eval_tokens=None, log=logs.append)  # fmt: skip
    assert len(logs) == 2 and ck["token_steps"] == 40 * 8 * 16
    assert ck["history"]["val"][-1] < 0.5 < ck["history"]["step"][0]
    loaded, itos, checkpoint = load_model(path)
    assert itos[0] == chardata.UNK and checkpoint["step"] == 40
    x = text[:16][None]
    torch.testing.assert_close(loaded(x)[0], model.eval()(x)[0])
    with pytest.raises(ValueError, match="too short for one batch"):
        train(model, text[:100], text[:100], [chardata.UNK, *"abcdefghij"], steps=50, batch_size=8, log=logs.append)


def test_save_model_writes_a_safe_checkpoint_and_refuses_an_lstm_one(tmp_path):
    model = small_model()
    checkpoint = {"format": checkpoints.CHECKPOINT_FORMAT, "model_config": model.config,
                  "model": model.state_dict(), "itos": [chardata.UNK, *"abcdefghij"]}  # fmt: skip
    save_model(checkpoint, tmp_path / "m.pt")
    assert not list(tmp_path.glob(".*tmp"))  # the temporary file was renamed
    loaded, _, _ = load_model(tmp_path / "m.pt")
    assert loaded.config == model.config
    lstm = charlstm.CharLSTM(V, 4, 8, 1)
    checkpoints.save_checkpoint({**checkpoint, "model_config": lstm.config, "model": lstm.state_dict()},
                           tmp_path / "lstm.pt")  # fmt: skip
    with pytest.raises(checkpoints.CheckpointError, match="not a transformer checkpoint: it holds an LSTM"):
        load_model(tmp_path / "lstm.pt")
    with pytest.raises(ValueError, match="model_config"):
        save_model({"model": {}}, tmp_path / "x.pt")


def test_loading_a_pickled_object_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"format": checkpoints.CHECKPOINT_FORMAT, "obj": pickle.PicklingError("x")}, path)
    with pytest.raises(pickle.UnpicklingError):
        load_model(path)


@pytest.mark.skipif(not shipped_checkpoint_path().is_file(), reason="no shipped checkpoint yet")
def test_shipped_checkpoint_loads_and_has_a_model_card():
    model, itos, checkpoint = load_model()
    itos_novel, _, _ = chardata.prepare(itos=itos, text="Natasha smiled.")
    assert itos == itos_novel
    assert checkpoint["token_steps"] > 0 and "optimizer" not in checkpoint
    card = shipped_checkpoint_path().with_suffix(".md")
    assert card.is_file() and f"{checkpoint['token_steps']:,}" in card.read_text(encoding="utf-8")
    logits, _ = model(chardata.encode(chardata.tokenize("Prince Andrew"), itos)[None])
    assert logits.shape == (1, 13, len(itos))
