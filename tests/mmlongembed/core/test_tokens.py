import math

import pytest

from mmlongembed.core.tokens import (
    DEFAULT_MAX_IMAGE_PIXELS, default_counter, fit_image_size, image_tokens, reference_tokenizer_file)
from mmlongembed.testing import texts_under
from tests.support.realdata import shared_data_dir

EDGE_CASES = [
    "", " ", "   \t  ", "\n", "\r\n", "a\r\nb\r\n\r\nc", "word   word\n\n\n  word",
    "e\u0301te\u0301", "cafe\u0301 naïve", "Å Å", "👍🏽 family: 👨‍👩‍👧‍👦 flags 🇫🇷🇩🇪",
    "中文句子。另一个句子！还有？", "mixed English和中文 text 123,456.78", "tabs\tand\vvertical\fformfeed",
    "don't won't it's I'm you're we've they'll he'd", "ÀÉÎÕÜ ß ﬁ ligature", "1234567890" * 5,
    "trailing space ", " leading", "\u200b zero width \u200b", "Ωmega ΣΙΓΜΑ", "a" * 3000,
]


@pytest.fixture(scope="module")
def reference():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(reference_tokenizer_file()))


def ref_count(reference, text: str) -> int:
    return len(reference.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("text", EDGE_CASES)
def test_counts_match_reference_on_edge_cases(reference, text):
    assert default_counter().count(text) == ref_count(reference, text)


def test_reference_has_the_qwen3_added_tokens(reference):
    assert reference.token_to_id("<|endoftext|>") == 151643
    assert reference.get_vocab_size(with_added_tokens=True) == 151669  # 26 added tokens up to id 151668


def test_special_token_strings_count_as_plain_text(reference):
    text = "before <|im_start|> after <|endoftext|>"
    ours = default_counter().count(text)
    # the reference collapses each special string to one id; we spell it out as ordinary text
    assert ours > ref_count(reference, text)
    assert ours == default_counter().count("before") + default_counter().count(" <|im_start|> after <|endoftext|>")


@pytest.mark.realdata
def test_counts_match_reference_on_all_shared_text(reference):
    texts = [t for t in texts_under(shared_data_dir()) if "<|" not in t]  # special strings: documented difference
    assert len(texts) > 1000
    assert any(any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in texts), "Chinese text expected"
    ours = default_counter().count_many(texts)
    theirs = [len(e.ids) for e in reference.encode_batch(texts, add_special_tokens=False)]
    mismatches = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    assert not mismatches, f"{len(mismatches)} mismatches, first: {texts[mismatches[0]][:80]!r}"


@pytest.mark.parametrize("height,width,expected", [(1, 1, 1), (32, 32, 1), (33, 33, 4), (1000, 872, 32 * 28)])
def test_image_token_formula(height, width, expected):
    assert image_tokens(height, width) == expected
    assert image_tokens(height, width) == math.ceil(height / 32) * math.ceil(width / 32)


def test_image_token_formula_rejects_empty_images():
    with pytest.raises(ValueError):
        image_tokens(0, 10)


def test_images_over_the_pixel_budget_shrink_with_aspect_kept():
    assert fit_image_size(100, 200, 1_000_000) == (100, 200)
    h, w = fit_image_size(4000, 3000, DEFAULT_MAX_IMAGE_PIXELS)
    assert h * w <= DEFAULT_MAX_IMAGE_PIXELS
    assert abs(h / w - 4 / 3) < 0.01
    assert fit_image_size(10_000, 1, 100) == (100, 1)


def test_identity_pins_the_bpe_file():
    identity = default_counter().identity
    assert len(identity["bpe_sha256"]) == 64
    assert identity["special_token_strings"] == "counted as plain text"
