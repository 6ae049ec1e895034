"""CBOW preprocessing and pairs: the tensor version equals the post's loop, and bad input is refused."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mllm_utils.cbow import (
    build_vocab,
    cbow_pairs,
    cbow_pairs_python,
    encode_paragraphs,
    wikitext_paragraphs,
)

LINES = [
    " \n",
    " = Homarus gammarus = \n",
    " \n",
    " The lobster grows to 3 @.@ 5 kg , a well @-@ known fact . \n",
    " \n",
    " = = Description = = \n",
    " It is blue ( mostly ) . \n",
]


def test_wikitext_paragraphs_drops_titles_and_blanks_and_strips_at_signs():
    assert wikitext_paragraphs(LINES) == [
        ["the", "lobster", "grows", "to", "3", ".", "5", "kg", ",", "a", "well", "-", "known", "fact", "."],
        ["it", "is", "blue", "(", "mostly", ")", "."],
    ]


def test_wikitext_paragraphs_refuses_a_single_string():
    with pytest.raises(TypeError, match="iterable of lines"):
        wikitext_paragraphs("one long text")


def test_build_vocab_keeps_frequent_words_and_maps_the_rest_to_unk():
    paragraphs = [["a", "b", "a"], ["a", "c", "b"], ["d"]]
    vocab = build_vocab(paragraphs, min_freq=2)
    assert vocab.get_itos() == ["<unk>", "a", "b"]
    assert vocab["zebra"] == 0 and vocab["c"] == 0
    ids = encode_paragraphs(paragraphs, vocab)
    assert [t.tolist() for t in ids] == [[1, 2, 1], [1, 0, 2], [0]]
    assert all(t.dtype == torch.long for t in ids)
    with pytest.raises(ValueError, match="min_freq"):
        build_vocab(paragraphs, min_freq=0)


def test_build_vocab_refuses_a_min_freq_that_keeps_no_word():
    # The default min_freq=50 on a small corpus would make every token <unk>: the error says what works.
    paragraphs = [["the", "cat", "sat"], ["the", "dog", "<unk>", "<unk>", "<unk>"], ["the", "end"]]
    with pytest.raises(ValueError, match="min_freq=50") as err:
        build_vocab(paragraphs)
    message = str(err.value)
    assert "'the', occurs 3 times in 10 tokens" in message and "at most 3" in message
    assert build_vocab(paragraphs, min_freq=3).get_itos() == ["<unk>", "the"]  # the advice works
    with pytest.raises(ValueError, match="paragraphs holds no word"):
        build_vocab([["<unk>", "<unk>"]], min_freq=1)


def test_pairs_of_one_paragraph_by_hand():
    contexts, centers = cbow_pairs([list(range(10, 17))], window=4)
    assert centers.tolist() == [12, 13, 14]
    assert contexts.tolist() == [[10, 11, 13, 14], [11, 12, 14, 15], [12, 13, 15, 16]]


def test_pairs_never_cross_a_paragraph():
    paragraphs = [[1, 2, 3], [4, 5], [6, 7, 8, 9, 10]]
    contexts, centers = cbow_pairs(paragraphs, window=2)
    assert centers.tolist() == [2, 7, 8, 9]
    assert contexts.tolist() == [[1, 3], [6, 8], [7, 9], [8, 10]]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 50), min_size=0, max_size=15), min_size=1, max_size=8),
    st.sampled_from([2, 4, 6, 8]),
)
def test_tensor_pairs_equal_the_posts_loop(paragraphs, window):
    if not any(len(p) > window for p in paragraphs):
        with pytest.raises(ValueError, match="tokens one sample needs"):
            cbow_pairs(paragraphs, window)
        return
    fast, slow = cbow_pairs(paragraphs, window), cbow_pairs_python(paragraphs, window)
    assert torch.equal(fast[0], slow[0]) and torch.equal(fast[1], slow[1])
    assert fast[0].shape == (len(fast[1]), window)


def test_pairs_accept_tensors_and_return_independent_tensors():
    ids = [torch.arange(9)]
    contexts, centers = cbow_pairs(ids, window=8)
    assert contexts.tolist() == [[0, 1, 2, 3, 5, 6, 7, 8]] and centers.tolist() == [4]
    centers[0] = 99
    assert ids[0][4] == 4  # the result is a copy, not a view into the corpus


@pytest.mark.parametrize(
    ("paragraphs", "window", "error", "match"),
    [
        ([], 8, ValueError, "corpus is empty"),
        ([[1, 2, 3]], 0, ValueError, "positive even number"),
        ([[1, 2, 3]], 3, ValueError, "positive even number"),
        ([[1, 2, 3]], -2, ValueError, "positive even number"),
        ([[1, 2, 3]], 2.0, TypeError, "window must be an int"),
        ([[1, 2, 3]], True, TypeError, "window must be an int"),
        ([[1, 2]], 2, ValueError, "tokens one sample needs"),
        ([[], []], 2, ValueError, "tokens one sample needs"),
        ([torch.zeros(2, 5, dtype=torch.long)], 2, ValueError, "paragraph 0 has shape"),
        ([[1, 2, 3], [0.5, 1.0, 2.0]], 2, TypeError, "paragraph 1 holds torch.float32"),
        (torch.arange(20), 2, TypeError, "not one tensor"),
    ],
)
def test_bad_input_gets_a_clear_error(paragraphs, window, error, match):
    with pytest.raises(error, match=match):
        cbow_pairs(paragraphs, window)
    with pytest.raises(error, match=match):
        cbow_pairs_python(paragraphs, window)


def test_encode_without_a_default_index_names_the_unknown_word():
    from mllm_utils.text import build_vocab_from_iterator

    vocab = build_vocab_from_iterator([["a", "b"]])
    assert [t.tolist() for t in encode_paragraphs([["b", "a"], []], vocab)] == [[1, 0], []]
    with pytest.raises(KeyError, match="'zebra' is not in the vocabulary"):
        encode_paragraphs([["a"], ["zebra"]], vocab)
    assert encode_paragraphs([], vocab) == []
