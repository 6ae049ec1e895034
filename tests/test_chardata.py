"""The War and Peace character data (mllm_utils.chardata): tokenizer, vocabulary, split, batches, folder."""

import pytest
import torch

from mllm_utils import chardata

SMALL_TEXT = (
    "Well, Prince, so Genoa and Lucca are now just family estates.\r\n\r\n"
    "If you don't tell me that this means war,  I will--\n"
    "\u201cHow are you?\u201d said he; 1805!\n"
) * 20


# ----------------------------------------------------------------- tokenizer, vocab, split


def test_tokenize_follows_the_post_rules():
    text = "Hello,\r\n\r\n  \u201cworld\u2019s\u201d   end!\nA-b; c? 1805\u20131812."
    assert "".join(chardata.tokenize(text)) == "Hello, worlds end! A-b; c? 18051812."


def test_tokenize_newlines_become_one_space_and_spaces_squeeze():
    assert chardata.tokenize("a\n\n\nb  \n c") == list("a b c")


def test_tokenize_rejects_non_strings():
    with pytest.raises(TypeError, match="takes a str"):
        chardata.tokenize(["a", "b"])


def test_vocab_encode_decode_round_trip():
    tokens = chardata.tokenize(SMALL_TEXT)
    itos = chardata.build_vocab(tokens)
    assert itos[0] == "<unk>" and itos[1:] == sorted(set(tokens))
    ids = chardata.encode(tokens, itos)
    assert ids.dtype == torch.long and len(ids) == len(tokens)
    assert chardata.decode(ids, itos) == "".join(tokens)
    assert chardata.decode(ids.tolist(), itos) == "".join(tokens)
    assert chardata.decode(torch.tensor(1), itos) == itos[1]  # one id as a 0-d tensor
    assert chardata.encode("Z#", itos).tolist() == [0, 0]  # unknown characters map to <unk>


def test_vocab_json_round_trip(tmp_path):
    itos = chardata.build_vocab("ab c")
    chardata.save_vocab(itos, tmp_path / "vocab.json")
    assert chardata.load_vocab(tmp_path / "vocab.json") == itos
    (tmp_path / "bad.json").write_text('{"itos": ["a"]}', encoding="utf-8")
    with pytest.raises(ValueError, match="not a vocabulary"):
        chardata.load_vocab(tmp_path / "bad.json")
    (tmp_path / "broken.json").write_text('{"itos": ["<unk>", ', encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        chardata.load_vocab(tmp_path / "broken.json")
    (tmp_path / "twice.json").write_text('{"itos": ["<unk>", "a", "a"]}', encoding="utf-8")
    with pytest.raises(ValueError, match="'a' twice"):
        chardata.load_vocab(tmp_path / "twice.json")


def test_build_vocab_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="no tokens"):
        chardata.build_vocab([])


def test_split_is_90_10_and_in_order():
    data = torch.arange(1000)
    train, val = chardata.split(data)
    assert len(train) == 900 and len(val) == 100
    assert torch.equal(torch.cat([train, val]), data)
    with pytest.raises(ValueError, match="strictly between"):
        chardata.split(data, 1.0)
    with pytest.raises(ValueError, match="too short"):
        chardata.split(torch.arange(5))


def test_prepare_with_a_given_vocab_reuses_it():
    itos, train, val = chardata.prepare(SMALL_TEXT)
    itos2, train2, _ = chardata.prepare(SMALL_TEXT, itos=itos)
    assert itos2 is itos and torch.equal(train, train2)
    assert len(train) == int(0.9 * (len(train) + len(val)))


# ----------------------------------------------------------------- batches


def test_windows_are_shifted_views():
    data = torch.arange(20)
    X, Y = chardata.windows(data, seq_len=4)
    assert X.shape == (4, 4) and torch.equal(Y, X + 1)
    assert X.data_ptr() == data.data_ptr()  # a view, not a copy
    X1, _ = chardata.windows(data, seq_len=4, stride=1)
    assert X1.shape == (16, 4)  # the post's data set: a window at every position
    X2, _ = chardata.windows(data, seq_len=4, offset=3)
    assert X2[0, 0] == 3 and len(X2) == 4
    with pytest.raises(ValueError, match="too few"):
        chardata.windows(torch.arange(4), seq_len=4)
    with pytest.raises(ValueError, match="4 from offset=16"):
        chardata.windows(data, seq_len=4, offset=16)


def test_batches_cover_every_window_once():
    data = torch.arange(101)
    gen = torch.Generator().manual_seed(0)
    got = list(chardata.batches(data, batch_size=3, seq_len=10, generator=gen))
    assert [len(X) for X, _ in got] == [3, 3, 3, 1]
    starts = sorted(int(X[i, 0]) for X, _ in got for i in range(len(X)))
    assert starts == list(range(0, 100, 10))
    assert all(torch.equal(Y, X + 1) for X, Y in got)
    assert len(list(chardata.batches(data, 3, 10, drop_last=True))) == 3
    with pytest.raises(ValueError, match="batch_size"):
        chardata.batches(data, 0, 10)  # refused at the call, not at the first batch


def test_batches_shuffle_at_the_first_batch_like_a_generator():
    """Checked at the call, but the order is drawn at the first batch: the generator's use is unchanged."""
    data = torch.arange(401)
    gen, twin = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    pending = chardata.batches(data, 4, 10, generator=gen)
    torch.rand(1, generator=gen), torch.rand(1, generator=twin)  # a draw between the call and the first batch
    X, _ = next(pending)
    assert torch.equal(X[:, 0] // 10, torch.randperm(40, generator=twin)[:4])


def test_stream_batches_continue_row_by_row():
    data = torch.arange(1000)
    got = list(chardata.stream_batches(data, batch_size=4, seq_len=8))
    assert all(X.shape == (4, 8) for X, _ in got)
    for (X0, _), (X1, _) in zip(got[:-1], got[1:], strict=True):
        assert torch.equal(X1[:, 0], X0[:, -1] + 1)  # row b of the next batch continues row b
    with pytest.raises(ValueError, match="smaller batch_size"):
        chardata.stream_batches(torch.arange(20), batch_size=8, seq_len=8)


# ----------------------------------------------------------------- the preprocessed folder


def test_data_dir_round_trip(tmp_path):
    itos, train, val = chardata.prepare(SMALL_TEXT)
    chardata.save_data_dir(tmp_path / "d", itos, train, val)
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["train.pt", "val.pt", "vocab.json"]
    itos2, train2, val2 = chardata.load_data_dir(tmp_path / "d")
    assert itos2 == itos and torch.equal(train2, train) and torch.equal(val2, val)
    assert train2.dtype == torch.long


@pytest.mark.parametrize("missing", ["vocab.json", "train.pt", "val.pt"])
def test_a_partial_folder_says_to_rerun_preprocess(tmp_path, missing):
    itos, train, val = chardata.prepare(SMALL_TEXT)
    chardata.save_data_dir(tmp_path, itos, train, val)
    (tmp_path / missing).unlink()
    with pytest.raises(FileNotFoundError, match=f"incomplete.*{missing} missing.*re-run .*preprocess --data"):
        chardata.load_data_dir(tmp_path)
    assert chardata.is_data_dir(tmp_path) == (missing != "vocab.json")


def test_a_folder_whose_files_do_not_fit_says_to_rerun_preprocess(tmp_path):
    itos, train, val = chardata.prepare(SMALL_TEXT)
    chardata.save_data_dir(tmp_path, itos, train, val)
    chardata.save_vocab(itos[:5], tmp_path / "vocab.json")  # another run's, smaller vocabulary
    with pytest.raises(ValueError, match="ids beyond .*re-run"):
        chardata.load_data_dir(tmp_path)
    (tmp_path / "train.pt").write_bytes(b"")
    with pytest.raises(ValueError, match="train.pt is not usable .*empty.*re-run"):
        chardata.load_data_dir(tmp_path)


def test_preprocess_again_removes_the_old_vocabulary_first(tmp_path, monkeypatch):
    """A run killed after the old vocab.json is gone leaves no mix of two runs' files."""
    itos, train, val = chardata.prepare(SMALL_TEXT)
    chardata.save_data_dir(tmp_path, itos, train, val)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(chardata, "atomic_write", killed)
    with pytest.raises(KeyboardInterrupt):
        chardata.save_data_dir(tmp_path, itos, train[:100], val)
    assert not chardata.is_data_dir(tmp_path)  # no vocab.json: train preprocesses again
