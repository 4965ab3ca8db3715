"""PDF pages and page regions as stored images, with pypdfium2 (BSD-3 / Apache-2.0; PDFium).

PyMuPDF is AGPL and poppler GPL, so neither is used. A page is rendered at ``dpi`` (PDFium's
size: ``ceil(points * dpi / 72)`` per side), fitted to the pixel budget with the toolkit's one
rule (``tokens.fit_image_size``, bicubic) and encoded by Pillow with fixed parameters, so the
same PDF, page and settings give the same bytes on every run (PDFium is deterministic for a fixed
version, which the manifest records). A size can be predicted from the page's size in points
without rendering (``page_image_size``), so a builder plans its windows from every page's token
cost and renders only the pages it uses; each render checks the prediction.

``PageRenderer`` renders each (file sha256, page, region, settings) once per build, however many
candidates hold the result, and counts renders and seconds (pages per second in the build
report). ``PdfFile`` reads the text layer: a whole page, or the text inside a layout box.
"""

from __future__ import annotations

import io
import math
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from mmlongembed.core.digests import content_sha256
from mmlongembed.core.errors import UserError
from mmlongembed.core.digests import file_sha256
from mmlongembed.core.tokens import DEFAULT_MAX_IMAGE_PIXELS, fit_image_size, image_tokens

POINTS_PER_INCH = 72.0
FORMATS = ("JPEG", "PNG")
RESAMPLE = "bicubic"
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")


def _pdfium():
    try:
        import pypdfium2
    except ImportError:  # pragma: no cover - the `pdf` extra is part of every documented install
        raise UserError("reading PDFs needs pypdfium2: pip install 'mmlongembed[pdf]'") from None
    return pypdfium2


def renderer_identity() -> dict:
    """Name and versions of the renderer (manifest and card)."""
    pdfium = _pdfium()
    from PIL import __version__ as pillow_version

    from pypdfium2.version import PDFIUM_INFO, PYPDFIUM_INFO

    return {"renderer": "pypdfium2", "version": str(PYPDFIUM_INFO), "pdfium": str(PDFIUM_INFO),
            "encoder": f"Pillow {pillow_version}", "licence": "BSD-3-Clause / Apache-2.0 (PDFium)",
            "module": pdfium.__name__}


@dataclass(frozen=True)
class RenderSettings:
    """How a page becomes stored bytes. Part of every cache key and of the manifest."""

    dpi: float = 144.0
    max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
    image_format: str = "JPEG"
    quality: int = 90

    def __post_init__(self):
        if self.dpi <= 0 or self.max_pixels <= 0:
            raise UserError(f"render settings need a positive dpi and pixel budget, got {self.dpi}, {self.max_pixels}")
        if self.image_format not in FORMATS:
            raise UserError(f"image format {self.image_format!r}: choose one of {', '.join(FORMATS)}")
        if not 1 <= self.quality <= 100:
            raise UserError(f"JPEG quality {self.quality} outside 1..100")

    @property
    def scale(self) -> float:
        return self.dpi / POINTS_PER_INCH

    def identity(self) -> dict:
        return {**renderer_identity(), "dpi": self.dpi, "max_pixels": self.max_pixels, "format": self.image_format,
                "quality": self.quality if self.image_format == "JPEG" else None, "resample": RESAMPLE,
                "size_rule": "ceil(points * dpi / 72) per side, then fit_image_size(max_pixels)"}


@dataclass
class RenderOptions:
    """The render options of a builder config (``class XConfig(CommonConfig, RenderOptions)``):
    each field becomes a CLI flag; ``render_settings()`` gives the settings they describe."""

    OPTIONS_TITLE = "page rendering options"  # its flags' group in --help (mmlongembed.core.flags)

    dpi: float = field(default=144.0, metadata={"help": "PDF render resolution (MMLongBench-Doc renders at 144)"})
    max_image_pixels: int = field(default=DEFAULT_MAX_IMAGE_PIXELS, metadata={
        "help": "pixel budget of a stored image (aspect kept); an image costs ceil(H/32)*ceil(W/32) tokens at its "
                "stored size"})
    image_format: str = field(default="JPEG", metadata={"help": "encoding of stored images", "choices": FORMATS})
    jpeg_quality: int = field(default=90, metadata={"help": "JPEG quality of stored images"})

    def render_settings(self) -> RenderSettings:
        return RenderSettings(dpi=self.dpi, max_pixels=self.max_image_pixels, image_format=self.image_format,
                              quality=self.jpeg_quality)


@dataclass(frozen=True)
class StoredImage:
    """Encoded bytes and the size they were stored (and are counted) at."""

    data: bytes
    height: int
    width: int

    @property
    def tokens(self) -> int:
        return image_tokens(self.height, self.width)

    @cached_property
    def sha256(self) -> str:  # hashed once: the gold checks ask for it per candidate and per quote
        return content_sha256(self.data)


def render_size(width_pt: float, height_pt: float, dpi: float) -> tuple[int, int]:
    """(height, width) in pixels that PDFium renders a region of that many points at ``dpi``."""
    scale = dpi / POINTS_PER_INCH
    return math.ceil(height_pt * scale), math.ceil(width_pt * scale)


def page_image_size(width_pt: float, height_pt: float, settings: RenderSettings) -> tuple[int, int]:
    """(height, width) a page of that size is stored at: rendered at the dpi, fitted to the budget."""
    return fit_image_size(*render_size(width_pt, height_pt, settings.dpi), settings.max_pixels)


def encode(pil_image, settings: RenderSettings, size: tuple[int, int] | None = None) -> StoredImage:
    """Resize (to ``size`` exactly, else to fit the budget) and encode with fixed parameters."""
    from PIL import Image

    height, width = size or fit_image_size(pil_image.height, pil_image.width, settings.max_pixels)
    if pil_image.mode not in ("RGB", "L"):
        pil_image = pil_image.convert("RGB")
    if (height, width) != (pil_image.height, pil_image.width):
        pil_image = pil_image.resize((width, height), Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    if settings.image_format == "JPEG":
        pil_image.save(buffer, format="JPEG", quality=settings.quality, optimize=False, progressive=False,
                       subsampling=2)
    else:
        pil_image.save(buffer, format="PNG", optimize=False, compress_level=6)
    return StoredImage(buffer.getvalue(), height, width)


def clean_text_layer(text: str) -> str:
    """PDFium's text layer -> plain text, one line per line: line breaks unified, a hyphen that
    PDFium marks at a line end (``\\x02``) joins its word, control characters and runs of spaces
    removed."""
    text = re.sub(r"\x02\s*(?:\r\n|\r|\n)?", "", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub(" ", text)
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def one_paragraph(text: str) -> str:
    """A text-layer excerpt as one line of running text (a quote, a summary's input)."""
    return " ".join(clean_text_layer(text).split())


@dataclass(frozen=True)
class Box:
    """A region of a page in PDF points, origin at the top left (MMDocIR's convention)."""

    x1: float
    y1: float
    x2: float
    y2: float

    @property
    def width(self) -> float:
        return self.x2 - self.x1

    @property
    def height(self) -> float:
        return self.y2 - self.y1

    def clipped(self, page_width: float, page_height: float) -> "Box":
        return Box(max(0.0, self.x1), max(0.0, self.y1), min(page_width, self.x2), min(page_height, self.y2))

    def intersects(self, other: "Box") -> bool:
        return self.x1 < other.x2 and other.x1 < self.x2 and self.y1 < other.y2 and other.y1 < self.y2

    def key(self) -> tuple[float, float, float, float]:
        return (round(self.x1, 1), round(self.y1, 1), round(self.x2, 1), round(self.y2, 1))


class PdfFile:
    """One PDF: its sha256, page sizes in points, text layer and image objects. Opened on first
    use and kept open (PDFium handles are not shared across threads: one lock per file)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._document = None
        self._sha256: str | None = None
        self._lock = threading.Lock()

    @property
    def sha256(self) -> str:
        if self._sha256 is None:
            self._sha256 = file_sha256(self.path)
        return self._sha256

    @property
    def document(self):
        if self._document is None:
            pdfium = _pdfium()
            try:
                self._document = pdfium.PdfDocument(str(self.path))
            except Exception as error:  # noqa: BLE001  (PdfiumError and OSError alike: one line)
                raise UserError(f"{self.path}: cannot open the PDF ({error})") from None
        return self._document

    def __len__(self) -> int:
        return len(self.document)

    def page_size(self, index: int) -> tuple[float, float]:
        """(width, height) in points, as PDFium renders the page."""
        with self._lock:
            page = self.document[index]
            return page.get_width(), page.get_height()

    def page_sizes(self) -> list[tuple[float, float]]:
        return [self.page_size(i) for i in range(len(self))]

    def text(self, index: int) -> str:
        """The page's text layer, cleaned (``clean_text_layer``)."""
        with self._lock:
            page = self.document[index]
            return clean_text_layer(page.get_textpage().get_text_range())

    def text_in_box(self, index: int, box: Box) -> str:
        """The text layer inside a top-left-origin box, as one line of running text."""
        with self._lock:
            page = self.document[index]
            height = page.get_height()
            raw = page.get_textpage().get_text_bounded(left=box.x1, bottom=height - box.y2, right=box.x2,
                                                       top=height - box.y1)
        return one_paragraph(raw)

    def image_boxes(self, index: int) -> list[Box]:
        """Boxes (top-left origin) of the raster images placed on the page, in reading order."""
        import pypdfium2.raw as raw

        with self._lock:
            page = self.document[index]
            height = page.get_height()
            boxes = []
            for obj in page.get_objects(filter=[raw.FPDF_PAGEOBJ_IMAGE]):
                left, bottom, right, top = obj.get_bounds()
                boxes.append(Box(left, height - top, right, height - bottom))
        return sorted(boxes, key=lambda b: (round(b.y1), round(b.x1)))

    def close(self) -> None:
        if self._document is not None:
            self._document.close()
            self._document = None


# What a renderer's cache may hold: the images it made last, up to this many bytes. A build at the
# sources' full size renders far more than this (MMDocRAG: every quote image of 4K questions); an
# image asked for again after it left is rendered again, to the same bytes.
RENDER_CACHE_BYTES = 256 << 20


@dataclass
class PageRenderer:
    """Renders pages, page regions and image files once per build while they are in its cache
    (by file sha256, page, region and settings; the images used last, up to ``cache_bytes``)
    and counts what it did."""

    settings: RenderSettings = field(default_factory=RenderSettings)
    renders: int = 0
    rendered_pages: int = 0
    seconds: float = 0.0
    cache_bytes: int = RENDER_CACHE_BYTES
    _cache: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _held: int = field(default=0, repr=False)  # bytes of the images in the cache
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _cached(self, key: tuple, make) -> StoredImage:
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        start = time.perf_counter()
        made = make()
        with self._lock:
            found = self._cache.setdefault(key, made)
            if found is made:
                self.renders += 1
                self.seconds += time.perf_counter() - start
                self._held += len(made.data)
                self._evict()
        return found

    def _evict(self) -> None:
        """Drop the images used longest ago until the cache is within its budget (the newest stays)."""
        while self._held > self.cache_bytes and len(self._cache) > 1:
            _, oldest = self._cache.popitem(last=False)
            self._held -= len(oldest.data)

    def page(self, pdf: PdfFile, index: int) -> StoredImage:
        """Page ``index`` (0-based) rendered, fitted and encoded; its size is the predicted one."""
        key = ("page", pdf.sha256, index, self.settings)

        def make() -> StoredImage:
            with pdf._lock:
                page = pdf.document[index]
                expected = page_image_size(page.get_width(), page.get_height(), self.settings)
                bitmap = page.render(scale=self.settings.scale)
                image = bitmap.to_pil()
            stored = encode(image, self.settings)
            if (stored.height, stored.width) != expected:
                raise RuntimeError(f"{pdf.path.name} page {index}: rendered {stored.height}x{stored.width}, "
                                   f"predicted {expected[0]}x{expected[1]}")
            self.rendered_pages += 1
            return stored

        return self._cached(key, make)

    def region(self, pdf: PdfFile, index: int, box: Box, max_pixels: int | None = None) -> StoredImage:
        """The region ``box`` of a page (a table, chart or figure), rendered at the dpi and
        fitted to ``max_pixels`` (default: the settings' budget)."""
        budget = max_pixels or self.settings.max_pixels
        key = ("region", pdf.sha256, index, box.key(), budget, self.settings)

        def make() -> StoredImage:
            with pdf._lock:
                page = pdf.document[index]
                width, height = page.get_width(), page.get_height()
                b = box.clipped(width, height)
                if b.width < 1 or b.height < 1:
                    raise ValueError(f"{pdf.path.name} page {index}: empty region {box}")
                bitmap = page.render(scale=self.settings.scale,
                                     crop=(b.x1, height - b.y2, width - b.x2, b.y1))
                image = bitmap.to_pil()
            return encode(image, RenderSettings(self.settings.dpi, budget, self.settings.image_format,
                                                self.settings.quality))

        return self._cached(key, make)

    def image_file(self, path: Path) -> StoredImage:
        """An image file (a pre-rendered page), fitted and re-encoded with the settings."""
        path = Path(path)
        return self.image_data(path.read_bytes(), str(path))

    def image_data(self, data: bytes, name: str) -> StoredImage:
        """An image's bytes (a file, or a member of an archive named ``name``), fitted and
        re-encoded with the settings; cached by the bytes' sha256 like ``image_file``."""
        key = ("file", content_sha256(data), self.settings)

        def make() -> StoredImage:
            from PIL import Image, UnidentifiedImageError

            try:
                with Image.open(io.BytesIO(data)) as im:
                    image = im.convert("RGB")
            except (OSError, UnidentifiedImageError) as error:
                raise UserError(f"{name}: not a readable image ({error})") from None
            self.rendered_pages += 1
            return encode(image, self.settings)

        return self._cached(key, make)

    def resized(self, image: StoredImage, height: int, width: int) -> StoredImage:
        """``image`` resized to exactly ``height`` x ``width`` (a refill that must cost the
        tokens of the image it replaces) and re-encoded."""
        key = ("resized", image.sha256, height, width, self.settings)

        def make() -> StoredImage:
            from PIL import Image

            with Image.open(io.BytesIO(image.data)) as im:
                return encode(im.convert("RGB"), self.settings, size=(height, width))

        return self._cached(key, make)

    def forget(self) -> None:
        """Let go of what was rendered (a caller that keeps it elsewhere, as the page store does);
        the counts stay."""
        with self._lock:
            self._cache.clear()
            self._held = 0

    def stats(self) -> dict:
        per_second = self.rendered_pages / self.seconds if self.seconds > 0 else None
        return {"renders": self.renders, "pages": self.rendered_pages, "seconds": round(self.seconds, 3),
                "pages_per_second": round(per_second, 2) if per_second else None}


def image_file_size(path: Path) -> tuple[int, int]:
    """(height, width) of an image file, from its header (no decoding)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            return im.height, im.width
    except (OSError, UnidentifiedImageError) as error:
        raise UserError(f"{path}: not a readable image ({error})") from None
