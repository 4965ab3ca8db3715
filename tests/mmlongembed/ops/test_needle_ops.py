"""Haystack windows, needle placement and the realised position (mmlongembed.ops.needle)."""

from __future__ import annotations

import pytest
from PIL import Image

from mmlongembed.core.documents import IMAGE_PLACEHOLDER, TEXT, Document, Segment, image_segment, text_segments
from mmlongembed.ops.length import exact_tokens
from mmlongembed.ops.needle import (
    Stream, fit_to_patches, insert_needle, locate_needle, nearest_boundary, needle_token_index, patch_grid,
    text_needle_segment)
from mmlongembed.core.rng import derive_rng
from mmlongembed.core.tokens import default_counter, image_tokens

TEXT_SAMPLE = (
    "The harbour was quiet that morning. Boats rocked against the pier. A gull called twice.\n"
    "Inland, the fields were still wet. Nobody had cut the hay yet. The farmer waited for sun.\n"
    "By noon the wind turned. Clouds came in from the west. Rain fell on the long road.\n"
)


def _segments():
    return text_segments(TEXT_SAMPLE * 20, default_counter())


def test_window_end_lands_in_the_asked_range_or_says_none():
    stream = Stream(_segments())
    for start in stream.starts[:30]:
        end = stream.window_end(start, 40, 60)
        if end is not None:
            assert 40 <= stream.sums[end] - stream.sums[start] <= 60
            assert stream.window_end(start, 40, 60) == end
    assert stream.window_end(0, 10 ** 6, 10 ** 6 + 5) is None


def test_window_starts_are_paragraph_starts():
    segments = _segments()
    stream = Stream(segments)
    for start in stream.starts[1:]:
        assert segments[start - 1].paragraph_end


def test_stratified_starts_spread_documents_over_the_stream():
    stream = Stream(_segments())
    plans = stream.stratified_starts(4, 50, derive_rng(0, "s"))
    first_tries = sorted(plan[0] for plan in plans)
    assert len(set(first_tries)) == 4
    usable = [s for s in stream.starts if stream.tokens - stream.sums[s] >= 50]
    # one first try per quarter of the usable starts
    quarters = [usable.index(s) * 4 // len(usable) for s in first_tries]
    assert quarters == [0, 1, 2, 3]
    assert stream.stratified_starts(4, 50, derive_rng(0, "s")) == plans


@pytest.mark.parametrize("depth", [0.0, 0.2, 0.5, 0.8, 1.0])
def test_nearest_boundary_is_nearest_to_the_depth(depth):
    segments = _segments()[:40]
    k, before, total = nearest_boundary(segments, depth)
    sums = [0]
    for s in segments:
        sums.append(sums[-1] + s.tokens)
    assert before == sums[k] and total == sums[-1]
    assert all(abs(sums[k] - depth * total) <= abs(x - depth * total) for x in sums)
    if depth == 0.0:
        assert k == 0
    if depth == 1.0:
        assert k == len(segments)


def test_text_needle_reads_as_its_own_sentence_or_paragraph():
    sentence_end = Segment(kind=TEXT, tokens=3, text="It rained.")
    next_sentence = Segment(kind=TEXT, tokens=3, text=" Then it stopped.")
    paragraph_end = Segment(kind=TEXT, tokens=3, text="It rained.\n", paragraph_end=True)
    paragraph_start = Segment(kind=TEXT, tokens=3, text="Later it cleared.")
    picture = image_segment(b"x", 32, 32)
    assert text_needle_segment("N.", sentence_end, next_sentence, 0).text == " N."
    assert text_needle_segment("N.", paragraph_end, paragraph_start, 0).text == "N.\n"
    assert text_needle_segment("N.", None, paragraph_start, 0).text == "N.\n"
    assert text_needle_segment("N.", sentence_end, None, 0).text == " N."
    assert text_needle_segment("N.", picture, picture, 0).text == "N.\n"


def test_needle_token_index_counts_text_and_images_before_the_needle():
    counter = default_counter()
    text = f"One two three.{IMAGE_PLACEHOLDER} Four five.{IMAGE_PLACEHOLDER}NEEDLE after"
    sizes = [(64, 64), (32, 96)]
    offset = text.index("NEEDLE")
    expected = counter.count("One two three.") + image_tokens(64, 64) + counter.count(" Four five.") + image_tokens(32, 96)
    assert needle_token_index(text, sizes, offset, counter) == expected
    assert needle_token_index(text, sizes, 0, counter) == 0


def test_needle_token_index_agrees_with_the_document_it_was_placed_in():
    counter = default_counter()
    segments = _segments()[:30]
    k, _, _ = nearest_boundary(segments, 0.5)
    needle = text_needle_segment("The key is under the blue stone.", segments[k - 1], segments[k], 0)
    needle = Segment(kind=TEXT, tokens=counter.count(needle.text), text=needle.text)
    document = Document("d", tuple([*segments[:k], needle, *segments[k:]]))
    text, _ = document.render()
    offset = sum(len(s.text) for s in segments[:k])
    index = needle_token_index(text, [], offset, counter)
    # prefix + rest recount to the whole (sentence boundaries are pre-token boundaries)
    assert index == counter.count(text[:offset])
    assert exact_tokens(document, counter) == index + counter.count(text[offset:])


def test_an_inserted_needle_is_located_where_it_was_put():
    counter = default_counter()
    window = _segments()[:30]
    k, _, _ = nearest_boundary(window, 0.5)
    needle = "The key is under the blue stone."
    document = insert_needle(window, k, needle, None, "d:x", counter)
    segment, text, (a, b), index = locate_needle(document, needle, counter)
    assert document.id == "d:x" and segment.origin == "needle" and segment.tokens == counter.count(segment.text)
    assert text[a:b] == needle and text.count(needle) == 1 and text == text.strip()
    assert index == counter.count(text[:a]) > 0
    # an image needle goes in as it is; its range is its placeholder, after the images before it
    photo, picture = image_segment(b"p", 64, 64), image_segment(b"n", 32, 32, origin="needle")
    mixed = [*window[:4], photo, *window[4:8], photo, *window[8:12]]
    document = insert_needle(mixed, 10, "", picture, "d:y", counter)
    segment, text, (a, b), index = locate_needle(document, None, counter)
    assert segment is picture and text[a:b] == IMAGE_PLACEHOLDER and text[:a].count(IMAGE_PLACEHOLDER) == 2
    assert index == needle_token_index(text, [(64, 64), (64, 64), (32, 32)], a, counter)
    assert index > 2 * image_tokens(64, 64)  # both photos and the text before them


@pytest.mark.parametrize("tokens,aspect", [(37, 1.0), (256, 0.75), (30, 1.5), (1, 2.0), (7, 1.0)])
def test_patch_grid_fills_the_budget_without_passing_it(tokens, aspect):
    rows, cols = patch_grid(tokens, aspect)
    assert rows * cols <= tokens
    assert 1 / 3 <= rows / cols <= 3
    # nothing within the aspect limits gets closer
    best = max(r * (tokens // r) for r in range(1, tokens + 1) if 1 / 3 <= r / max(1, tokens // r) <= 3 and tokens // r)
    assert rows * cols == best


def test_fit_to_patches_gives_whole_patches_without_distortion():
    image = Image.new("RGB", (300, 200), (10, 120, 200))
    fitted = fit_to_patches(image, 4, 7)
    assert fitted.size == (7 * 32, 4 * 32)
    assert image_tokens(fitted.height, fitted.width) == 28
