"""PDF rendering and the text layer (mmlongembed.media.pdf) on generated PDFs and, where present,
the shared sample PDFs."""

import hashlib
import io

import pytest
from PIL import Image

from mmlongembed.media.pdf import (
    Box, PageRenderer, PdfFile, RenderSettings, clean_text_layer, page_image_size, render_size)
from mmlongembed.core.rng import derive_rng
from mmlongembed.testing import paged_document_spec, write_pdf
from tests.support.realdata import shared_data_dir

pytest.importorskip("pypdfium2")


@pytest.fixture(scope="module")
def pdf_path(tmp_path_factory):
    spec = paged_document_spec(derive_rng(0, "pdf-test"), 3, 4, image_every=2)
    spec[2]["size"] = (842, 595)  # one landscape page
    path = write_pdf(tmp_path_factory.mktemp("pdf") / "doc.pdf", spec)
    return path, spec


def test_render_size_is_pdfiums():
    assert render_size(595.28, 841.89, 144) == (1684, 1191)  # A4, as MMLongBench-Doc renders it
    assert render_size(612.0, 792.0, 144) == (1584, 1224)
    assert page_image_size(595.28, 841.89, RenderSettings()) == (1191, 842)  # fitted to 1,003,520 pixels


def test_pages_render_at_the_predicted_size_deterministically_and_once(pdf_path):
    path, spec = pdf_path
    settings = RenderSettings(dpi=50, max_pixels=200 * 250)
    first, second = PageRenderer(settings), PageRenderer(settings)
    pdf = PdfFile(path)
    assert len(pdf) == 4
    for index, page in enumerate(spec):
        image = first.page(pdf, index)
        assert (image.height, image.width) == page_image_size(*page["size"], settings)
        with Image.open(io.BytesIO(image.data)) as im:
            assert (im.height, im.width) == (image.height, image.width) and im.format == "JPEG"
            assert not im.info.get("exif") and not im.info.get("comment")
        assert second.page(PdfFile(path), index).data == image.data  # a fresh renderer, same bytes
        assert first.page(pdf, index) is image  # cached: rendered once
    assert first.rendered_pages == 4 and first.renders == 4
    assert first.page(pdf, 2).width > first.page(pdf, 2).height  # the landscape page
    png = PageRenderer(RenderSettings(dpi=50, max_pixels=200 * 250, image_format="PNG")).page(pdf, 0)
    assert png.data.startswith(b"\x89PNG") and png.data != first.page(pdf, 0).data


def test_settings_change_the_bytes_and_the_cache_key(pdf_path):
    path, _ = pdf_path
    pdf = PdfFile(path)
    renderer = PageRenderer(RenderSettings(dpi=50, max_pixels=10_000_000))
    a = renderer.page(pdf, 0)
    b = PageRenderer(RenderSettings(dpi=40, max_pixels=10_000_000)).page(pdf, 0)
    assert (a.height, a.width) != (b.height, b.width)
    identity = renderer.settings.identity()
    assert identity["renderer"] == "pypdfium2" and identity["dpi"] == 50 and identity["version"]


def test_text_layer_and_boxes(pdf_path):
    path, spec = pdf_path
    pdf = PdfFile(path)
    text = pdf.text(0)
    heading = spec[0]["lines"][0][3]
    assert heading in text
    kind, box, paragraph = next(b for b in spec[0]["blocks"] if b[0] == "text")
    inside = pdf.text_in_box(0, Box(*box))
    assert inside == paragraph  # the whole paragraph, as one line, nothing from outside the box
    photos = [Box(*b[1]) for b in spec[1]["blocks"] if b[0] == "photo"]
    found = pdf.image_boxes(1)
    assert len(found) == len(photos) == 1
    assert all(abs(x - y) < 0.5 for x, y in zip(found[0].key(), photos[0].key()))
    region = PageRenderer(RenderSettings(dpi=72)).region(pdf, 1, found[0])
    # 160x120 points at 72 dpi (PDFium rounds each cropped edge up: a row may go)
    assert abs(region.height - 120) <= 1 and abs(region.width - 160) <= 1


def test_clean_text_layer():
    assert clean_text_layer("logical rea\x02\r\nsoning  task\r\n\r\nnext\x07line ") == "logical reasoning task\nnext line"


def test_image_files_are_fitted_and_reencoded(tmp_path):
    path = tmp_path / "page1.png"
    Image.new("RGB", (400, 300), (10, 200, 30)).save(path)
    stored = PageRenderer(RenderSettings(max_pixels=100 * 75)).image_file(path)
    assert (stored.height, stored.width) == (75, 100) and stored.data[:2] == b"\xff\xd8"
    resized = PageRenderer(RenderSettings()).resized(stored, 33, 47)
    assert (resized.height, resized.width) == (33, 47)


def test_the_render_cache_holds_the_images_used_last_up_to_its_byte_budget():
    """A build at the sources' full size renders more images than memory holds (MMDocRAG: every
    quote image of 4K questions): the renderer keeps the ones used last, up to its budget, and
    renders one asked for again after it left to the same bytes."""
    import numpy as np

    def noise(seed: int) -> bytes:
        buffer = io.BytesIO()
        pixels = (np.random.default_rng(seed).random((120, 160, 3)) * 255).astype("uint8")
        Image.fromarray(pixels).save(buffer, format="PNG")
        return buffer.getvalue()

    sources = [noise(k) for k in range(3)]
    probe = PageRenderer(RenderSettings())
    size = max(len(probe.image_data(data, f"{k}.png").data) for k, data in enumerate(sources))
    renderer = PageRenderer(RenderSettings(), cache_bytes=2 * size)  # room for two of the three
    first = [renderer.image_data(data, f"{k}.png") for k, data in enumerate(sources)]
    assert renderer.renders == 3
    assert renderer.image_data(sources[2], "2.png") is first[2]  # held: not rendered again
    assert renderer.renders == 3
    again = renderer.image_data(sources[0], "0.png")  # the one used longest ago left the cache
    assert renderer.renders == 4 and again is not first[0] and again.data == first[0].data
    assert renderer.image_data(sources[2], "2.png") is first[2]  # the one used last stayed


@pytest.mark.realdata
def test_sample_pdfs_render_at_predicted_sizes():
    documents = shared_data_dir("mmlongbench_doc", "documents")
    settings = RenderSettings(dpi=36, max_pixels=150 * 200)
    renderer = PageRenderer(settings)
    for path in sorted(documents.glob("*.pdf"))[:4]:
        pdf = PdfFile(path)
        for index in (0, len(pdf) - 1):
            image = renderer.page(pdf, index)
            assert (image.height, image.width) == page_image_size(*pdf.page_size(index), settings)
    digest = hashlib.sha256(renderer.page(PdfFile(sorted(documents.glob("*.pdf"))[0]), 0).data).hexdigest()
    again = PageRenderer(settings).page(PdfFile(sorted(documents.glob("*.pdf"))[0]), 0)
    assert hashlib.sha256(again.data).hexdigest() == digest
