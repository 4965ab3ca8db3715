"""Exact token sums without recounting (``splits_between``, ``TokenCounter.count_joined`` and
``count_cached``, ``ops.length.summed_tokens`` / ``segment_token_offsets``), and the other
shortcuts of the fast build and validation (BM25 words by line, ``LineIndex``, text features):
each must give exactly what the plain way gives, also where pieces fuse."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmlongembed.core.documents import (
    IMAGE_PLACEHOLDER, TEXT, Document, Segment, count_rendered, image_segment, text_document, text_segments)
from mmlongembed.ops.multisource.evidence import LineIndex, texts_holding, token_offsets_at
from mmlongembed.ops.length import exact_tokens, segment_token_offsets, summed_tokens
from mmlongembed.checks.summary import _words, document_words
from mmlongembed.checks.shortcuts import _text_features
from mmlongembed.testing import texts_under
from mmlongembed.core.tokens import default_counter, splits_between
from tests.support.realdata import shared_data_dir

ENGLISH = ("The committee met on Jan. 5 with Dr. Smith. It adopted three rules! Did it work? Yes.\n"
           "Second paragraph starts here. It has \"quoted text.\" And more.\n\n"
           "Third paragraph, after a blank line. J. K. Rowling wrote it. The U.S. agreed.\n")
CHINESE = "今天天气很好。我们去公园散步！你想一起去吗？“好的。”他说。\n第二段开始了；内容继续。Next 句子。"
# characters around which the pre-tokenizer's alternatives behave differently
TRICKY = list("ab Z9.,'s\n\r\t 。中“”\"!?-") + [
    "\u0301", "\u00a0", "\u2028", "'s", "'ll", "  ", "\n\n", " \n", "e\u0301", "\x0b", "\x1c", "\u3000", "Σ", "<|image|>"]
pieces_of = st.lists(st.sampled_from(TRICKY), min_size=1, max_size=6).map("".join)


@settings(max_examples=400, deadline=None)
@given(pieces_of, pieces_of, pieces_of, pieces_of)
def test_a_seam_said_to_split_splits_whatever_surrounds_it(x, left, right, y):
    counter = default_counter()
    if splits_between(left, right):
        assert counter.count(x + left + right + y) == counter.count(x + left) + counter.count(right + y)


def test_the_seams_of_split_text_split_and_a_fusing_seam_is_told():
    assert splits_between("It ends.", " Next one")  # a sentence after a sentence
    assert splits_between("A paragraph.\n\n", "Title")  # a paragraph after a newline run
    assert not splits_between("句子。", "Next")  # a Chinese full stop fuses with a letter
    assert not splits_between("A space ", " and another")  # a space on both sides
    assert not splits_between("end.", "\nnext")  # punctuation takes the newlines after it
    assert not splits_between("line\n", " \nnext")  # a whitespace run that ends in a newline


def _check_joined(pieces: list[str], cut: int) -> None:
    counter = default_counter()
    counts = counter.count_many(pieces)
    starts = [0] if cut <= 0 or cut >= len(pieces) else [0, cut]
    sections = ["".join(pieces[a:b]) for a, b in zip(starts, [*starts[1:], len(pieces)])]
    assert counter.count_joined(pieces, counts, starts) == [counter.count(s) for s in sections]


@settings(max_examples=300, deadline=None)
@given(st.lists(pieces_of, min_size=1, max_size=8), st.integers(0, 8))
def test_joined_counts_equal_the_counts_of_the_joined_text(pieces, cut):
    _check_joined(pieces, cut)


def _real_pieces(texts: list[str]) -> list[str]:
    """Sentence pieces as builders cut them (``text_segments``), plus some empty ones."""
    counter = default_counter()
    return [s.text for t in texts for s in text_segments(t, counter)] + [""]


SAMPLE_PIECES = _real_pieces([ENGLISH, CHINESE, ENGLISH.replace("\n", "\r\n")])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_joined_counts_of_split_text_in_any_order(data):
    """Pieces of real text put together in any order (paragraph ends before sentences, Chinese
    before English...): the sum with its seams checked is the count of the joined text."""
    pieces = data.draw(st.lists(st.sampled_from(SAMPLE_PIECES), min_size=1, max_size=12))
    _check_joined(pieces, data.draw(st.integers(0, 12)))


@functools.lru_cache(maxsize=1)
def _shared_pieces() -> list[str]:
    pieces = _real_pieces(texts_under(shared_data_dir()))
    assert len(pieces) > 10000 and any("\u4e00" <= ch <= "\u9fff" for p in pieces for ch in p)
    return pieces


@pytest.mark.realdata
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_joined_counts_of_the_shared_data_pieces(data):
    """Every sample source (English, Chinese, reports, captions...) cut into pieces as builders
    cut it: a run of consecutive pieces, and pieces drawn from anywhere in any order, sum (seams
    checked) to the full recount of their joined text."""
    pieces = _shared_pieces()
    start = data.draw(st.integers(0, len(pieces) - 1))
    _check_joined(pieces[start:start + data.draw(st.integers(1, 80))], data.draw(st.integers(0, 80)))
    _check_joined(data.draw(st.lists(st.sampled_from(pieces), min_size=1, max_size=20)), data.draw(st.integers(0, 20)))


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_summed_length_and_segment_offsets_equal_the_recount(data):
    """A document of text segments and images: ``summed_tokens`` is ``exact_tokens``, and the
    offsets at segment starts are what ``token_offsets_at`` recounts from the rendered text
    (images counted as their tokens; the text on either side of one counted apart)."""
    counter = default_counter()
    segments = []
    for piece in data.draw(st.lists(st.sampled_from(SAMPLE_PIECES[:-1] + ["<|image|>"]), min_size=1, max_size=14)):
        if piece == "<|image|>":
            segments.append(image_segment(b"x", 64, 40))
        else:
            segments.append(Segment(kind=TEXT, tokens=counter.count(piece), text=piece))
    document = Document("d", tuple(segments))
    assert summed_tokens(document, counter) == exact_tokens(document, counter)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(segments)), max_size=4))))
    offsets = segment_token_offsets(document, counter, cuts)
    if all(s.kind == TEXT for s in segments):
        chars = [sum(len(s.text) for s in segments[:i]) for i in range(len(segments) + 1)]
        recounted = token_offsets_at(document.text, [chars[i] for i in cuts], counter)
        assert {i: offsets[i] for i in cuts} == {i: recounted.get(chars[i], 0) for i in cuts}
    else:
        for i in cuts:
            head = Document("h", tuple(segments[:i]))
            text, _ = head.render()
            sizes = [(s.height, s.width) for s in head.segments if s.is_visual]
            assert offsets[i] == sum(count_rendered(text, sizes, counter))


def test_a_fused_seam_is_counted_as_the_joined_text():
    counter = default_counter()
    text = "好。。AbcAbc很好。(s）”" * 3  # full stops fuse with what follows them
    document = text_document("d", text, counter)
    assert document.tokens != counter.count(text)  # the plain sum drifts here
    assert summed_tokens(document, counter) == counter.count(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SAMPLE_PIECES + ["\n", "  \n", "\n\n \n", " x\n"]), max_size=20))
def test_counting_by_remembered_paragraphs_counts_the_text(pieces):
    counter = default_counter()
    text, memo = "".join(pieces), {}
    assert counter.count_cached(text, memo) == counter.count(text)
    assert counter.count_cached(text, memo) == counter.count(text)  # from memory this time
    positions = sorted({len("".join(pieces[:k])) for k in range(0, len(pieces) + 1, 3)})
    assert token_offsets_at(text, positions, counter, memo) == token_offsets_at(text, positions, counter)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(SAMPLE_PIECES + ["<|image|>", "ΣΑΣ\n", "’s", "naïve café", "ＡＢＣ"]), max_size=20))
def test_bm25_words_by_line_are_the_words_of_the_text(pieces):
    segments = tuple(image_segment(b"x", 32, 32) if p == "<|image|>" else Segment(kind=TEXT, tokens=1, text=p)
                     for p in pieces)
    document = Document("d", segments)
    cache: dict = {}
    assert document_words(document, cache) == _words(document.render()[0])
    assert document_words(document, cache) == _words(document.render()[0])  # from the cache


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab \n.", max_size=12), min_size=1, max_size=6),
       st.lists(st.text(alphabet="ab \n.", max_size=5), max_size=6))
def test_the_line_index_finds_every_text_that_holds_a_string(texts, needles):
    by_id = {f"t{i}": t for i, t in enumerate(texts)}
    index = LineIndex(by_id)
    for needle in needles:
        assert index.holding(needle) == {k for k, t in by_id.items() if needle in t}
    assert texts_holding(by_id, dict(enumerate(needles))) == {
        k: {i for i, t in by_id.items() if needle in t} for k, needle in enumerate(needles)}


def _features_reference(text: str) -> dict[str, float]:
    """The label-free audit's text features, computed the plain way."""
    body = text.replace(IMAGE_PLACEHOLDER, "\x00")
    chars = max(1, len(body))
    return {
        "chars": float(len(body)), "images": float(text.count(IMAGE_PLACEHOLDER)),
        "leading_whitespace": float(len(body) - len(body.lstrip())),
        "trailing_whitespace": float(len(body) - len(body.rstrip())),
        "ends_with_newline": float(body.endswith("\n")),
        "blank_lines_per_1k_chars": 1000.0 * body.count("\n\n") / chars,
        "newlines_per_1k_chars": 1000.0 * body.count("\n") / chars,
        "double_spaces_per_1k_chars": 1000.0 * body.count("  ") / chars,
        "tabs_per_1k_chars": 1000.0 * body.count("\t") / chars,
        "trailing_spaces_per_1k_lines": 1000.0 * sum(1 for line in body.split("\n") if line != line.rstrip(" \t"))
        / (body.count("\n") + 1),
    }


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", " ", "\t", "\n", "\r", "\u00a0", "\x1c", "\x0b", "b.", "\u3000",
                                 IMAGE_PLACEHOLDER]), max_size=16).map("".join))
def test_text_features_are_the_plain_ones(text):
    """The formatting features as the plain reference computes them; the rest are the word
    statistics (mmlongembed.ops.wordstats, tested in test_wordstats) of the same body."""
    from mmlongembed.ops.wordstats import text_features as word_features

    features, reference = _text_features(text), _features_reference(text)
    assert {name: features[name] for name in reference} == reference
    body = text.replace(IMAGE_PLACEHOLDER, "\x00")
    assert {name: value for name, value in features.items() if name not in reference} == word_features(body)
