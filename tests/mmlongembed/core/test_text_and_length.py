from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mmlongembed.core.documents import IMAGE_PLACEHOLDER, Document, count_rendered, image_segment, text_document
from mmlongembed.core.errors import FitError
from mmlongembed.ops.length import (
    SegmentSums, exact_tokens, find_block, has_block, prefix_sums, span_at_fraction, truncate_to_band)
from mmlongembed.core.pools import LengthBand
from mmlongembed.core.text import split_paragraphs, split_sentences
from mmlongembed.core.tokens import default_counter

ENGLISH = (
    "The committee met on Jan. 5 with Dr. Smith. It adopted three rules! Did it work? Yes.\n"
    "Second paragraph starts here. It has \"quoted text.\" And more.\n\n"
    "Third paragraph, after a blank line. J. K. Rowling wrote it. The U.S. agreed.\n"
)
CHINESE = "今天天气很好。我们去公园散步！你想一起去吗？“好的。”他说。\n第二段开始了；内容继续。"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .!?\n\r。！“”'\"Z9 \t中")), max_size=200))
def test_splitting_is_lossless(text):
    paragraphs = split_paragraphs(text)
    assert "".join(paragraphs) == text
    for paragraph in paragraphs:
        assert "".join(split_sentences(paragraph)) == paragraph


def test_english_sentences_keep_abbreviations_and_initials():
    sentences = [s for p in split_paragraphs(ENGLISH) for s in split_sentences(p)]
    assert sentences[0] == "The committee met on Jan. 5 with Dr. Smith."
    assert sentences[1] == " It adopted three rules!"
    assert " J. K. Rowling wrote it." in sentences
    assert " The U.S. agreed.\n" in sentences
    assert len(split_paragraphs(ENGLISH)) == 3


def test_chinese_sentences_split_on_fullwidth_punctuation():
    sentences = split_sentences(split_paragraphs(CHINESE)[0])
    assert sentences == ["今天天气很好。", "我们去公园散步！", "你想一起去吗？", "“好的。”", "他说。\n"]


def test_sum_of_english_pieces_equals_the_whole_count():
    counter = default_counter()
    doc = text_document("d", ENGLISH * 20, counter)
    assert doc.tokens == counter.count(ENGLISH * 20)


def test_rendered_recount_counts_images_and_checks_placeholders():
    counter = default_counter()
    doc = Document("d", (
        *text_document("a", "Hello there.\n", counter).segments,
        image_segment(b"x", 64, 65),
        *text_document("b", "Bye.", counter).segments,
    ))
    text, images = doc.render()
    assert text == f"Hello there.\n{IMAGE_PLACEHOLDER}Bye."
    assert count_rendered(text, [(64, 65)], counter) == (counter.count("Hello there.\n") + counter.count("Bye."), 2 * 3)
    assert exact_tokens(doc, counter) == doc.tokens
    with pytest.raises(ValueError):
        count_rendered(text, [], counter)


def _long_doc(n_paragraphs=40):
    body = "\n".join(
        " ".join(f"Sentence {i}-{j} talks about topic {i * j} at length." for j in range(6)) for i in range(n_paragraphs)
    )
    return text_document("long", body, default_counter())


def test_truncate_lands_in_band_at_a_paragraph_boundary():
    doc = _long_doc()
    band = LengthBand(target=1000, lo=800, hi=1000)
    fitted = truncate_to_band(doc, band, default_counter())
    assert band.contains(fitted.n_tokens)
    assert fitted.n_tokens == default_counter().count(fitted.document.text)
    assert fitted.document.segments[-1].paragraph_end
    assert doc.text.startswith(fitted.document.text)


def test_truncate_fails_fast_when_the_budget_cannot_be_met():
    doc = _long_doc(3)
    with pytest.raises(FitError) as error:
        truncate_to_band(doc, LengthBand(target=100_000, lo=90_000, hi=100_000), default_counter())
    assert error.value.reason == "too_short"
    # a band narrower than any sentence: no boundary inside it
    with pytest.raises(FitError):
        truncate_to_band(doc, LengthBand(target=12, lo=11, hi=12), default_counter())


def test_find_block_meets_the_length_and_prefers_paragraph_starts():
    doc = _long_doc()
    rng = np.random.default_rng(0)
    start, end = find_block(doc.segments, 300, 310, rng, aim=305)
    sums = prefix_sums(doc.segments)
    assert 300 <= sums[end] - sums[start] <= 310
    with pytest.raises(FitError):
        find_block(doc.segments, 10**6, 10**6 + 5, rng)


def test_find_block_matches_characters_as_well_as_tokens_when_asked():
    """Donor text denser in characters than its host would make every variant longer in
    characters than its positive; with a character aim the block follows the host's density."""
    counter = default_counter()
    dense = "Interdepartmental reconciliation notwithstanding comprehensive appropriations. "
    sparse = "It is so. We go on. "
    doc = text_document("donor", "".join((dense if k % 2 else sparse) * 3 + "\n" for k in range(40)), counter)
    sums, chars = prefix_sums(doc.segments), [0]
    for segment in doc.segments:
        chars.append(chars[-1] + len(segment.text))
    tokens_wanted = 30
    runs = {}
    for char_aim in (60, 400):
        start, end = find_block(doc.segments, tokens_wanted - 6, tokens_wanted + 6, np.random.default_rng(0),
                                aim=tokens_wanted, char_aim=char_aim, chars_per_token=4.0)
        runs[char_aim] = (sums[end] - sums[start], chars[end] - chars[start])
        assert abs(runs[char_aim][0] - tokens_wanted) <= 6
    assert runs[60][1] < runs[400][1]
    assert abs(runs[60][1] - 60) < abs(runs[400][1] - 60) and abs(runs[400][1] - 400) < abs(runs[60][1] - 400)


def test_find_block_matches_words_as_well_when_asked():
    """At equal tokens and characters, a donor of longer words would give every variant fewer
    words than its positive ("the most words" would find it); with a word aim the block follows
    the host's words."""
    counter = default_counter()
    long_words = "Interdepartmental reconciliation notwithstanding comprehensive appropriations. "
    short_words = "It is so. We go on and on. "
    doc = text_document("donor", "".join((long_words if k % 2 else short_words) * 3 + "\n" for k in range(40)),
                        counter)
    sums, words = prefix_sums(doc.segments), [0]
    for segment in doc.segments:
        words.append(words[-1] + len(segment.text.split()))
    tokens_wanted = 30
    runs = {}
    for word_aim in (8, 28):
        start, end = find_block(doc.segments, tokens_wanted - 6, tokens_wanted + 6, np.random.default_rng(0),
                                aim=tokens_wanted, word_aim=word_aim, words_per_token=0.75)
        runs[word_aim] = words[end] - words[start]
        assert abs(sums[end] - sums[start] - tokens_wanted) <= 6
    assert abs(runs[8] - 8) < abs(runs[28] - 8) and abs(runs[28] - 28) < abs(runs[8] - 28)


def _find_block_one_run_at_a_time(segments, need_lo, need_hi, rng, aim, char_aim, chars_per_token, word_aim,
                                  words_per_token, block_cost):
    """find_block as it was written before its runs were weighed in numpy: each run in turn, the
    first of equal misses kept, stopping at a miss of zero."""
    import bisect

    sums = prefix_sums(segments)
    chars = [0, *np.cumsum([len(s.text) for s in segments]).tolist()]
    words = [0, *np.cumsum([len(s.text.split()) for s in segments]).tolist()]
    paragraph_starts = [0] + [i + 1 for i, s in enumerate(segments[:-1]) if s.paragraph_end]
    for starts in (paragraph_starts, list(range(len(segments)))):
        best = None
        for k in rng.permutation(len(starts)):
            start = starts[k]
            end = bisect.bisect_left(sums, sums[start] + need_lo, lo=start + 1)
            while end < len(sums) and sums[end] - sums[start] <= need_hi:
                miss = float(abs(sums[end] - sums[start] - aim))
                miss += abs(chars[end] - chars[start] - char_aim) / chars_per_token
                miss += abs(words[end] - words[start] - word_aim) / words_per_token
                miss += float(block_cost(np.array([start]), np.array([end]))[0])
                if best is None or miss < best[0]:
                    best = (miss, start, end)
                if miss == 0:
                    return start, end
                end += 1
        if best is not None:
            return best[1], best[2]
    raise FitError("no_block")


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), width=st.integers(0, 40), aim_shift=st.integers(-20, 20),
       with_cost=st.booleans())
def test_find_block_picks_the_run_that_weighing_each_run_in_turn_picks(seed, width, aim_shift, with_cost):
    """The numpy search must keep the reference's choice exactly (built data depends on it): the
    same shuffled start order, ends ascending, the first of equal misses, the same float sums."""
    doc = _long_doc()
    need_lo, need_hi = 120, 120 + width
    aim = min(max(need_lo + width // 2 + aim_shift, need_lo), need_hi)
    weights = np.random.default_rng(seed).random(len(doc.segments) + 1)
    cost = ((lambda starts, ends: np.round(weights[ends] - weights[starts], 1) * 50) if with_cost
            else (lambda starts, ends: np.zeros(len(starts))))
    kwargs = dict(aim=aim, char_aim=aim * 4 + aim_shift, chars_per_token=3.7, word_aim=aim * 3 // 4,
                  words_per_token=0.7, block_cost=cost)
    assert (find_block(doc.segments, need_lo, need_hi, np.random.default_rng(seed), **kwargs)
            == _find_block_one_run_at_a_time(doc.segments, need_lo, need_hi, np.random.default_rng(seed), **kwargs))


def test_find_block_takes_no_run_whose_cost_is_over_the_limit():
    """The lexical tier's donor block: a run costing more than ``max_block_cost`` is no candidate,
    however near its length; none under the limit is a FitError, not the least bad run."""
    doc = _long_doc()
    sums = prefix_sums(doc.segments)
    allowed_start = len(doc.segments) // 2

    def cost(starts, ends):
        return np.where(starts == allowed_start, 0.0, 10.0)

    start, end = find_block(doc.segments, 60, 400, np.random.default_rng(1), aim=61, block_cost=cost,
                            max_block_cost=5.0)
    assert start == allowed_start and 60 <= sums[end] - sums[start] <= 400
    with pytest.raises(FitError):
        find_block(doc.segments, 60, 400, np.random.default_rng(1), aim=61,
                   block_cost=lambda starts, ends: np.full(len(starts), 10.0), max_block_cost=5.0)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), width=st.integers(0, 80), limit=st.sampled_from([0.5, 2.0, np.inf]),
       batch=st.sampled_from([3, 1 << 14]))
def test_has_block_answers_as_find_block_does_for_each_row_of_costs(seed, width, limit, batch):
    """The lexical tier's reach reads both sides of the query's weight over one set of runs
    (``has_block``): each row's answer is whether ``find_block`` with that row's cost finds a
    run. The rows below allow only runs from starts that open no paragraph, runs on one side,
    no run at all, or infinite costs: a ``has_block`` that looked at paragraph starts only, or
    took an infinite cost for a run within an infinite limit, answers otherwise. Runs are
    weighed in batches of ``batch`` (3: many batches, the answers gathered across them)."""
    doc = _long_doc(12)
    table = SegmentSums.of(doc.segments)
    rng = np.random.default_rng(seed)
    weights = rng.random((5, len(doc.segments) + 1)) * 3
    paragraph_start = np.isin(np.arange(len(doc.segments) + 1), table.paragraph_starts)

    def rows(starts, ends):
        costs = np.abs(weights[:, ends] - weights[:, starts])
        costs[0] = np.where(costs[0] > 2.5, np.nan, costs[0])  # a NaN cost is a run taken, as find_block takes it
        costs[1] = np.where(paragraph_start[starts], 9.0, costs[1] / 4)  # only runs from inside a paragraph
        costs[2] = np.full(len(starts), 9.0)  # none
        costs[3] = np.where(costs[3] < 1, np.inf, 0.0)  # infinite or free
        costs[4] = np.inf  # infinite: no run, whatever the limit
        return costs

    need_lo, need_hi = 100, 100 + width
    with mock.patch("mmlongembed.ops.length.RUN_BATCH", batch):
        found = has_block(table, need_lo, need_hi, rows, limit)
        for row in range(5):
            try:
                find_block(doc.segments, need_lo, need_hi, np.random.default_rng(seed),
                           block_cost=lambda starts, ends: rows(starts, ends)[row], max_block_cost=limit)
                expected = True
            except FitError:
                expected = False
            assert bool(found[row]) == expected, row
    assert not has_block(table, 50, 40, rows, limit).any()  # no length to fill: no run, one answer a row


def test_find_block_reads_a_documents_kept_segment_sums_as_its_segments():
    doc = _long_doc()
    cost = lambda starts, ends: (ends - starts) % 3 * 1.0  # noqa: E731
    for seed in range(5):
        kwargs = dict(aim=150 + seed, char_aim=600, word_aim=110, block_cost=cost, max_block_cost=1.5)
        assert (find_block(SegmentSums.of(doc.segments), 120, 180, np.random.default_rng(seed), **kwargs)
                == find_block(doc.segments, 120, 180, np.random.default_rng(seed), **kwargs))


def test_span_at_fraction_snaps_to_paragraphs():
    doc = _long_doc()
    start, end = span_at_fraction(doc.segments, 0.25, 0.75)
    sums = prefix_sums(doc.segments)
    assert doc.segments[start - 1].paragraph_end and doc.segments[end - 1].paragraph_end
    assert abs(sums[start] / sums[-1] - 0.25) < 0.05 and abs(sums[end] / sums[-1] - 0.75) < 0.05


def test_pieces_kept_as_lengths_cut_the_text_again_as_the_split_did():
    """GovReport keeps each report's sentences as lengths and cuts its document again from them:
    the same pieces, paragraph ends included."""
    from mmlongembed.core.documents import piece_lengths, pieces_again, text_pieces

    for text in (ENGLISH, CHINESE, "Last line without a stop", ""):
        pieces = text_pieces(text)
        lengths = piece_lengths(pieces)
        assert sum(length >> 1 for length in lengths) == len(text)
        assert pieces_again(text, lengths) == pieces
