"""Procedural image needles: composed shapes, colours, textures and glyphs drawn from a spec.

The paper's image needles are synthetic and out of distribution, so that no model saw them in
training, and come with visually analogous distractors. Here every image is drawn with Pillow
from an ``ImageSpec``; a *family* fixes every attribute but one (the glyph, the number of
shapes, or the cell the shape sits in), so its members differ in exactly that attribute. Because
the image comes from its spec, its exact description comes for free (``describe``) and serves as
the text query.

Drawing is deterministic for a given Pillow build (the glyph font is Pillow's bundled default
font), and encoding is deterministic, so the same spec always gives the same bytes.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, dataclass, replace

import numpy as np

# Colours far apart in hue or lightness, so that names are unambiguous.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (214, 39, 40), "orange": (255, 127, 14), "yellow": (240, 200, 20), "green": (44, 160, 44),
    "teal": (23, 170, 170), "blue": (31, 90, 200), "purple": (128, 60, 170), "pink": (240, 120, 190),
    "brown": (140, 86, 55), "black": (25, 25, 25),
}
BACKGROUNDS: dict[str, tuple[int, int, int]] = {
    "white": (250, 250, 250), "pale grey": (215, 215, 215), "cream": (245, 235, 200), "pale blue": (200, 225, 245),
}
SHAPES = ("circle", "square", "triangle", "diamond", "hexagon", "star", "cross", "pentagon")
PATTERNS = ("solid", "horizontal stripes", "vertical stripes", "diagonal stripes", "dots", "checks")
GLYPH_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no I/1/O/0: too alike to name reliably
GRID = 5  # the "position" family places one shape in a GRID x GRID board
MAX_COUNT = 36  # the "count" family draws 1..MAX_COUNT shapes in a 6 x 6 layout
VARYING_ATTRIBUTES = ("glyph", "position", "count")


@dataclass(frozen=True)
class ImageSpec:
    shape: str
    colour: str
    pattern: str
    background: str
    glyph: str = ""  # drawn on the shape; "" for none
    count: int = 1  # how many copies of the shape
    position: tuple[int, int] | None = None  # (row, column), 1-based, in a GRID x GRID board

    def __post_init__(self):
        if self.shape not in SHAPES or self.colour not in COLOURS or self.pattern not in PATTERNS:
            raise ValueError(f"unknown shape, colour or pattern in {self}")
        if self.background not in BACKGROUNDS:
            raise ValueError(f"unknown background {self.background!r}")
        if not 1 <= self.count <= MAX_COUNT:
            raise ValueError(f"count must be in 1..{MAX_COUNT}, got {self.count}")
        if self.position is not None and (self.count != 1 or not all(1 <= p <= GRID for p in self.position)):
            raise ValueError(f"position needs count 1 and cells in 1..{GRID}, got {self.position}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def _plural(shape: str) -> str:
    return shape + ("es" if shape.endswith("x") or shape.endswith("ss") else "s")


def describe(spec: ImageSpec) -> str:
    """The exact description of what ``render`` draws (the text query of an image needle)."""
    texture = "" if spec.pattern == "solid" else f" with {spec.pattern}"
    if spec.count > 1:
        body = f"{spec.count} {spec.colour} {_plural(spec.shape)}{texture}"
    else:
        article = "an" if spec.colour[0] in "aeiou" else "a"
        body = f"{article} {spec.colour} {spec.shape}{texture}"
    text = f"A picture of {body} on a {spec.background} background"
    if spec.position is not None:
        text += (f", in row {spec.position[0]}, column {spec.position[1]} of a {GRID} by {GRID} grid "
                 "(rows counted from the top, columns from the left)")
    if spec.glyph:
        label = "each labelled" if spec.count > 1 else "labelled"
        text += f", {label} with the characters \"{spec.glyph}\""
    return text + "."


def _polygon(shape: str, cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    def ring(n, radius, offset=-math.pi / 2):
        return [(cx + radius * math.cos(offset + 2 * math.pi * k / n), cy + radius * math.sin(offset + 2 * math.pi * k / n))
                for k in range(n)]

    if shape == "square":
        return [(cx - r * 0.85, cy - r * 0.85), (cx + r * 0.85, cy - r * 0.85), (cx + r * 0.85, cy + r * 0.85),
                (cx - r * 0.85, cy + r * 0.85)]
    if shape == "triangle":
        return ring(3, r)
    if shape == "diamond":
        return ring(4, r)
    if shape == "pentagon":
        return ring(5, r)
    if shape == "hexagon":
        return ring(6, r, 0.0)
    if shape == "star":
        outer, inner = ring(5, r), ring(5, r * 0.45, -math.pi / 2 + math.pi / 5)
        return [p for pair in zip(outer, inner) for p in pair]
    if shape == "cross":
        a, b = r * 0.35, r
        return [(cx - a, cy - b), (cx + a, cy - b), (cx + a, cy - a), (cx + b, cy - a), (cx + b, cy + a),
                (cx + a, cy + a), (cx + a, cy + b), (cx - a, cy + b), (cx - a, cy + a), (cx - b, cy + a),
                (cx - b, cy - a), (cx - a, cy - a)]
    raise ValueError(f"no polygon for {shape}")


def _texture(pattern: str, size: int, colour, background):
    """A full-canvas RGB texture; the shape mask cuts it out."""
    from PIL import Image, ImageDraw

    light = tuple(int(c + (255 - c) * 0.65) for c in colour)
    canvas = Image.new("RGB", (size, size), colour if pattern == "solid" else light)
    draw = ImageDraw.Draw(canvas)
    step = max(6, size // 24)
    if pattern == "horizontal stripes":
        for y in range(0, size, 2 * step):
            draw.rectangle([0, y, size, y + step - 1], fill=colour)
    elif pattern == "vertical stripes":
        for x in range(0, size, 2 * step):
            draw.rectangle([x, 0, x + step - 1, size], fill=colour)
    elif pattern == "diagonal stripes":
        for k in range(-size, size, 2 * step):
            draw.polygon([(k, 0), (k + step, 0), (k + step + size, size), (k + size, size)], fill=colour)
    elif pattern == "dots":
        for y in range(step // 2, size, 2 * step):
            for x in range(step // 2, size, 2 * step):
                draw.ellipse([x, y, x + step, y + step], fill=colour)
    elif pattern == "checks":
        for y in range(0, size, step):
            for x in range(0, size, step):
                if (x // step + y // step) % 2 == 0:
                    draw.rectangle([x, y, x + step - 1, y + step - 1], fill=colour)
    return canvas


def _centres(spec: ImageSpec, size: int) -> tuple[list[tuple[float, float]], float]:
    if spec.position is not None:
        cell = size / GRID
        row, col = spec.position
        return [((col - 0.5) * cell, (row - 0.5) * cell)], cell * 0.42
    if spec.count == 1:
        return [(size / 2, size / 2)], size * 0.36
    side = math.ceil(math.sqrt(spec.count))
    cell = size / side
    centres = [((k % side + 0.5) * cell, (k // side + 0.5) * cell) for k in range(spec.count)]
    return centres, cell * 0.40


def render(spec: ImageSpec, size: int = 256):
    """Draw the spec on a square canvas of ``size`` pixels (a PIL RGB image)."""
    from PIL import Image, ImageDraw, ImageFont

    colour, background = COLOURS[spec.colour], BACKGROUNDS[spec.background]
    image = Image.new("RGB", (size, size), background)
    draw = ImageDraw.Draw(image)
    if spec.position is not None:  # the board makes "row r, column c" well defined
        cell = size / GRID
        for k in range(1, GRID):
            draw.line([(k * cell, 0), (k * cell, size)], fill=(150, 150, 150), width=1)
            draw.line([(0, k * cell), (size, k * cell)], fill=(150, 150, 150), width=1)
    centres, radius = _centres(spec, size)
    mask = Image.new("L", (size, size), 0)
    mask_draw = ImageDraw.Draw(mask)
    for cx, cy in centres:
        if spec.shape == "circle":
            mask_draw.ellipse([cx - radius, cy - radius, cx + radius, cy + radius], fill=255)
        else:
            mask_draw.polygon(_polygon(spec.shape, cx, cy, radius), fill=255)
    image.paste(_texture(spec.pattern, size, colour, background), (0, 0), mask)
    # a dark outline keeps light textures visible against light backgrounds
    for cx, cy in centres:
        if spec.shape == "circle":
            draw.ellipse([cx - radius, cy - radius, cx + radius, cy + radius], outline=(40, 40, 40), width=2)
        else:
            draw.polygon(_polygon(spec.shape, cx, cy, radius), outline=(40, 40, 40), width=2)
    if spec.glyph:
        font = ImageFont.load_default(size=max(8, int(radius * 0.8)))
        for cx, cy in centres:
            # a white plate under the glyph keeps it legible on any texture
            left, top, right, bottom = draw.textbbox((cx, cy), spec.glyph, font=font, anchor="mm")
            pad = max(2, int(radius * 0.08))
            draw.rectangle([left - pad, top - pad, right + pad, bottom + pad], fill=(255, 255, 255),
                           outline=(40, 40, 40))
            draw.text((cx, cy), spec.glyph, font=font, fill=(0, 0, 0), anchor="mm")
    return image


def encode(spec: ImageSpec, size: int, quality: int = 90) -> bytes:
    """JPEG bytes of the rendered spec (deterministic: fixed quality, no optimiser randomness)."""
    buffer = io.BytesIO()
    render(spec, size).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


@dataclass(frozen=True)
class ImageFamily:
    """Members share every attribute but ``varying``."""

    id: str
    varying: str
    base: ImageSpec
    members: tuple[ImageSpec, ...]

    def as_dict(self) -> dict:
        return {"id": self.id, "varying": self.varying, "base": json.loads(self.base.to_json()),
                "values": [_value_of(m, self.varying) for m in self.members]}


def _value_of(spec: ImageSpec, attribute: str):
    value = getattr(spec, attribute)
    return list(value) if isinstance(value, tuple) else value


def attribute_capacity(attribute: str) -> int:
    """How many distinct members a family varying ``attribute`` can have."""
    if attribute == "glyph":
        return len(GLYPH_ALPHABET) ** 2
    if attribute == "position":
        return GRID * GRID
    if attribute == "count":
        return MAX_COUNT
    raise ValueError(f"unknown varying attribute {attribute!r}; expected one of {VARYING_ATTRIBUTES}")


def draw_family(rng: np.random.Generator, varying: str, n: int, family_id: str) -> ImageFamily:
    """A fresh family of ``n`` specs that differ only in ``varying``."""
    if n > attribute_capacity(varying):
        raise ValueError(f"a {varying} family holds at most {attribute_capacity(varying)} members, asked for {n}")

    def pick(options):
        return options[int(rng.integers(len(options)))]

    base = ImageSpec(shape=pick(SHAPES), colour=pick(list(COLOURS)), pattern=pick(PATTERNS),
                     background=pick(list(BACKGROUNDS)))
    if varying == "glyph":
        codes: list[str] = []
        while len(codes) < n:
            code = "".join(pick(GLYPH_ALPHABET) for _ in range(2))
            if code not in codes:
                codes.append(code)
        members = [replace(base, glyph=c) for c in codes]
    elif varying == "position":
        cells = [(r, c) for r in range(1, GRID + 1) for c in range(1, GRID + 1)]
        members = [replace(base, position=cells[i]) for i in sorted(rng.choice(len(cells), n, replace=False))]
    else:  # count: shapes small enough to be counted, so no texture is needed to tell them apart
        counts = sorted(int(c) + 1 for c in rng.choice(MAX_COUNT, n, replace=False))
        members = [replace(base, count=c) for c in counts]
    return ImageFamily(id=family_id, varying=varying, base=base, members=tuple(members))
