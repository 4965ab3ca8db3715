"""The needles themselves: NeedleBench templates and their entity-swapped families, and the
procedurally drawn image needles with their exact descriptions."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from mmlongembed.needles import images as synth
from mmlongembed.needles.text import draw_text_family, parse_templates, surnames
from mmlongembed.core.rng import derive_rng

RECORDS = [
    {"needle": "The first band to play on the Moon was the Virtual Rocket Band.",
     "retrieval_question": "Which band was the first to perform on the Moon? Please answer in the format 'x'.",
     "arg1": "the Moon", "arg2": "Virtual Rocket Band", "language": "English"},
    {"needle": "The first band to play on Mars was the Galaxy Melody Band.",
     "retrieval_question": "Which band was the first to perform on Mars? Please answer in the format 'x'.",
     "arg1": "Mars", "arg2": "Galaxy Melody Band", "language": "English"},
    {"needle": "Hidden on Ghost Island is the legendary Sun Stone.",
     "retrieval_question": "What legendary item is hidden on Ghost Island? Please answer.",
     "arg1": "Ghost Island", "arg2": "Sun Stone", "language": "English"},
    {"needle": "Hidden on Gem Island is the legendary Lucky Clover.",
     "retrieval_question": "What legendary item is hidden on Gem Island? Please answer.",
     "arg1": "Gem Island", "arg2": "Lucky Clover", "language": "English"},
    # the answer repeats the subject: not a template
    {"needle": "The ruler of the Orion star system is Orion the Hunter.",
     "retrieval_question": "Who is the ruler of the Orion star system?", "arg1": "Orion", "arg2": "Orion the Hunter",
     "language": "English"},
    {"needle": "在月球上的第一个乐队是虚拟火箭乐队。", "retrieval_question": "哪一个？", "arg1": "月球", "arg2": "虚拟火箭乐队",
     "language": "Chinese"},
    {"needle": "no fields"},
]
NAMES = "George Cross,John Wilson,Charles Jones,Samantha Lane,Jonathan Ingram MD,Kevin White,Dylan Crawford," \
        "Lynn Lopez,Raymond Ward,Eric Hopkins,Marcus Miller,Troy Sanchez PhD,Ann Sims,Bryan Grant,Sara Gomez"


def test_templates_cut_out_subject_and_answer_and_count_what_they_leave_out():
    templates, skipped = parse_templates(RECORDS)
    by_needle = {t.needle: t for t in templates}
    assert set(by_needle) == {"The first band to play on {S} was the {A}.", "Hidden on {S} is the legendary {A}."}
    band = by_needle["The first band to play on {S} was the {A}."]
    assert band.question == "Which band was the first to perform on {S}?"  # answer-format instruction dropped
    assert band.answers == ("Galaxy Melody Band", "Virtual Rocket Band")
    assert band.subject_suffix == ""
    assert by_needle["Hidden on {S} is the legendary {A}."].subject_suffix == " Island"
    assert skipped == {"needle_not_a_template": 1, "needle_other_language": 1, "needle_missing_field": 1}


def test_surnames_drop_titles_and_keep_one_of_each():
    names = surnames(NAMES + ",Eve Wilson")
    assert "MD" not in names and "PhD" not in names and "Ingram" in names and "Sanchez" in names
    assert names.count("Wilson") == 1


@pytest.mark.parametrize("kind", ["name", "place", "number"])
def test_a_family_differs_in_its_subject_only(kind):
    templates, _ = parse_templates(RECORDS)
    island = next(t for t in templates if t.subject_suffix == " Island")
    needles = draw_text_family(island, derive_rng(0, "t", kind), 8, surnames(NAMES), kind, "fam")
    subjects = [n.subject for n in needles]
    assert len(set(subjects)) == 8 and all(s.endswith(" Island") for s in subjects)
    for n in needles:
        assert n.text == f"Hidden on {n.subject} is the legendary {n.answer}."
        assert n.question == f"What legendary item is hidden on {n.subject}?"
        assert n.answer in island.answers
    if kind == "number":  # one shared stem, so only the number tells them apart
        assert len({s.split("-")[0] for s in subjects}) == 1
    # no subject inside another's needle: a needle cannot also answer another query
    for a in needles:
        for b in needles:
            if a is not b:
                assert a.subject not in b.text


def test_forbidden_subjects_are_never_drawn_and_exhaustion_is_an_error():
    templates, _ = parse_templates(RECORDS)
    names = surnames(NAMES)
    needles = draw_text_family(templates[0], derive_rng(1), 5, names, "name", "f", forbidden=lambda s: "Wilson" in s)
    assert all("Wilson" not in n.subject for n in needles)
    with pytest.raises(ValueError, match="distinct"):
        draw_text_family(templates[0], derive_rng(1), len(names) + 1, names, "name", "f")


def test_families_are_reproducible_from_the_seed_and_change_with_it():
    templates, _ = parse_templates(RECORDS)
    names = surnames(NAMES)
    first = draw_text_family(templates[0], derive_rng(3, "p"), 6, names, "place", "f")
    again = draw_text_family(templates[0], derive_rng(3, "p"), 6, names, "place", "f")
    other = draw_text_family(templates[0], derive_rng(4, "p"), 6, names, "place", "f")
    assert first == again and first != other


@pytest.mark.parametrize("varying", synth.VARYING_ATTRIBUTES)
def test_image_family_members_differ_in_exactly_one_attribute(varying):
    family = synth.draw_family(derive_rng(0, varying), varying, 25, "f")
    assert len(family.members) == 25 and len(set(family.members)) == 25
    for member in family.members:
        for attribute in ("shape", "colour", "pattern", "background", "glyph", "count", "position"):
            if attribute != varying:
                assert getattr(member, attribute) == getattr(family.base, attribute)
    descriptions = [synth.describe(m) for m in family.members]
    assert len(set(descriptions)) == 25  # the text query tells every member apart
    pictures = [synth.encode(m, 128) for m in family.members]
    assert len(set(pictures)) == 25


def test_description_states_what_is_drawn():
    spec = synth.ImageSpec(shape="hexagon", colour="orange", pattern="dots", background="cream", glyph="K7")
    assert synth.describe(spec) == ('A picture of an orange hexagon with dots on a cream background, '
                                    'labelled with the characters "K7".')
    many = synth.ImageSpec(shape="star", colour="blue", pattern="solid", background="white", count=7)
    assert synth.describe(many).startswith("A picture of 7 blue stars on a white background")
    placed = synth.ImageSpec(shape="circle", colour="red", pattern="solid", background="white", position=(2, 4))
    assert "row 2, column 4 of a 5 by 5 grid" in synth.describe(placed)


def test_rendering_puts_the_shape_where_the_spec_says():
    spec = synth.ImageSpec(shape="square", colour="red", pattern="solid", background="white", position=(1, 5))
    pixels = np.asarray(synth.render(spec, 250)).astype(int)
    red = (abs(pixels[..., 0] - 214) < 30) & (pixels[..., 1] < 80) & (pixels[..., 2] < 80)
    rows, cols = np.nonzero(red)
    assert red.sum() > 500
    assert rows.max() < 50 and cols.min() > 200  # inside the top-right cell of the 5 x 5 board


def _blobs(mask: np.ndarray) -> int:
    """Connected components (4-neighbour) of a boolean mask."""
    seen = np.zeros_like(mask, dtype=bool)
    count = 0
    for start in zip(*np.nonzero(mask)):
        if seen[start]:
            continue
        count += 1
        stack = [start]
        seen[start] = True
        while stack:
            y, x = stack.pop()
            for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):
                if 0 <= ny < mask.shape[0] and 0 <= nx < mask.shape[1] and mask[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    stack.append((ny, nx))
    return count


@pytest.mark.parametrize("count", [1, 7, 23])
def test_count_family_draws_that_many_shapes(count):
    spec = synth.ImageSpec(shape="circle", colour="blue", pattern="solid", background="white", count=count)
    pixels = np.asarray(synth.render(spec, 240)).astype(int)
    blue = (abs(pixels[..., 0] - 31) < 40) & (abs(pixels[..., 1] - 90) < 40) & (pixels[..., 2] > 150)
    assert _blobs(blue) == count


def test_encoding_is_deterministic_and_a_jpeg_of_the_asked_size():
    spec = synth.ImageSpec(shape="star", colour="green", pattern="checks", background="pale blue", glyph="Q3")
    data = synth.encode(spec, 160)
    assert data == synth.encode(spec, 160)
    with Image.open(io.BytesIO(data)) as im:
        assert im.format == "JPEG" and im.size == (160, 160)


def test_bad_specs_and_families_are_refused():
    with pytest.raises(ValueError):
        synth.ImageSpec(shape="blob", colour="red", pattern="solid", background="white")
    with pytest.raises(ValueError):
        synth.ImageSpec(shape="star", colour="red", pattern="solid", background="white", count=2, position=(1, 1))
    with pytest.raises(ValueError, match="at most 25"):
        synth.draw_family(derive_rng(0), "position", 26, "f")
