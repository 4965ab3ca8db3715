"""Small generated sources that ship with the package, so every builder can be built on a fresh
clone without ../shared/data (tests, the registry-wide smoke test, users trying things out)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from mmlongembed.core.rng import derive_rng

def strings_in(value):
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)


def texts_under(root: Path) -> list[str]:
    """All text in a directory of text, JSON and JSON Lines files (the sample sources)."""
    texts: list[str] = []
    for path in sorted(Path(root).rglob("*")):
        if path.suffix in (".txt", ".raw", ".csv", ".md"):
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
        elif path.suffix == ".jsonl":
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.strip():
                    texts.extend(strings_in(json.loads(line)))
        elif path.suffix == ".json":
            texts.extend(strings_in(json.loads(path.read_text(encoding="utf-8"))))
    return [t for t in texts if t.strip()]


SYLLABLES = "ka lo mi ne su ra to vi de pa zu qe ba ri no fe gu xi wa yo".split()


def made_up_word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))


FIXTURE_NOTE = ("SYNTHETIC sources written by mmlongembed.testing for tests: generated records in the source's "
                "format. Never publish a build made from them.")


def mark_synthetic(root: Path, note: str = FIXTURE_NOTE) -> None:
    """Leave the SYNTHETIC marker (``mmlongembed.core.synthetic.SYNTHETIC_MARKER``) in a sources root
    that a fixture writer filled: every build from it records so in its manifest, and ``mmle
    push`` refuses it."""
    from mmlongembed.core.synthetic import SYNTHETIC_MARKER

    Path(root).mkdir(parents=True, exist_ok=True)
    (Path(root) / SYNTHETIC_MARKER).write_text(note + "\n", encoding="utf-8")




def write_fixture_build(root: Path, pools, title: str = "Test benchmark", seed: int = 0,
                        builder: str = "fixture") -> Path:
    """Hand-made pools written in the published layout with the core writer, with a minimal card
    and a manifest that records the data files (harness and publishing tests)."""
    from mmlongembed.output.card import yaml_header
    from mmlongembed.output.writer import pool_statistics, write_json, write_tables

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    written = write_tables(pools, root, seed=seed, builder=builder, progress=False)
    header = yaml_header(licence="cc-by-4.0", languages=["en"], pretty_name=title, configs=written.specs,
                         n_rows=sum(len(p.queries) + len(p.candidates) for p in pools))
    (root / "README.md").write_text(header + f"# {title}\n", encoding="utf-8")
    write_json(root / "manifest.json", {"builder": {"name": builder}, "toolkit": "mmlongembed-test",
                                        "files": written.files, "pools": [pool_statistics(p) for p in pools]})
    return root


# -- test videos -----------------------------------------------------------------------------------

def write_test_video(path: Path, seconds: float, seed: int, fps: int = 4, size=(64, 48), audio: bool = True) -> Path:
    """A small MPEG-4 file of random-noise frames (each second looks different), with a quiet
    tone as audio track unless ``audio`` is False."""
    import av

    rng = derive_rng(seed, "test-video")
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        stream.options = {"qscale": "3"}
        audio_stream = container.add_stream("aac", rate=16000, layout="mono") if audio else None
        n = int(round(seconds * fps))
        base = None
        for i in range(n):
            if i % fps == 0:  # a new scene every second
                base = (rng.random((size[1], size[0], 3)) * 255).astype("uint8")
            frame = av.VideoFrame.from_ndarray(base, format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        if audio_stream is not None:
            samples = int(seconds * 16000)
            tone = (np.sin(np.arange(samples) * 2 * np.pi * (220 + 20 * (seed % 7)) / 16000) * 3000).astype("int16")
            for start in range(0, samples, 1024):
                chunk = tone[start:start + 1024].reshape(1, -1)
                frame = av.AudioFrame.from_ndarray(chunk, format="s16", layout="mono")
                frame.sample_rate, frame.pts = 16000, start
                for packet in audio_stream.encode(frame):
                    container.mux(packet)
            for packet in audio_stream.encode():
                container.mux(packet)
    return path


# -- paged documents (PDFs) -------------------------------------------------------------------

def _pdf_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_pdf(path: Path, pages: list[dict]) -> Path:
    """A small valid PDF written by hand (no PDF library needed): each page is
    ``{"size": (w, h), "lines": [(x, y, font_size, text)], "rects": [(x, y, w, h, (r, g, b))],
    "images": [(x, y, w, h, jpeg_bytes, px_w, px_h)]}`` with coordinates in points from the top
    left. Text is Helvetica (a real text layer), rectangles are vector graphics, images are
    embedded JPEGs (image objects)."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in below
    pages_obj = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    kids = []
    for page in pages:
        width, height = page["size"]
        ops, xobjects = [], []
        for x, y, w, h, (r, g, b) in page.get("rects", []):
            ops.append(f"q {r:.3f} {g:.3f} {b:.3f} rg {x:.2f} {height - y - h:.2f} {w:.2f} {h:.2f} re f Q")
        for k, (x, y, w, h, data, pw, ph) in enumerate(page.get("images", [])):
            image = add(f"<< /Type /XObject /Subtype /Image /Width {pw} /Height {ph} /ColorSpace /DeviceRGB "
                        f"/BitsPerComponent 8 /Filter /DCTDecode /Length {len(data)} >>\nstream\n".encode()
                        + data + b"\nendstream")
            xobjects.append(f"/Im{k} {image} 0 R")
            ops.append(f"q {w:.2f} 0 0 {h:.2f} {x:.2f} {height - y - h:.2f} cm /Im{k} Do Q")
        for x, y, size, text in page.get("lines", []):
            ops.append(f"BT /F1 {size} Tf {x:.2f} {height - y - size:.2f} Td ({_pdf_text(text)}) Tj ET")
        stream = "\n".join(ops).encode("latin-1")
        contents = add(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
        resources = f"<< /Font << /F1 {font} 0 R >> /XObject << {' '.join(xobjects)} >> >>"
        kids.append(add(f"<< /Type /Page /Parent {pages_obj} 0 R /MediaBox [0 0 {width} {height}] "
                        f"/Resources {resources} /Contents {contents} 0 R >>".encode()))
    objects[catalog - 1] = f"<< /Type /Catalog /Pages {pages_obj} 0 R >>".encode()
    objects[pages_obj - 1] = (f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] "
                              f"/Count {len(kids)} >>").encode()
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root {catalog} 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(out))
    return path


def _noise_jpeg(rng: np.random.Generator, width: int, height: int) -> bytes:
    import io

    from PIL import Image

    base = rng.integers(0, 256, size=3)
    pixels = np.clip(base + rng.normal(0, 40, size=(height, width, 3)), 0, 255).astype("uint8")
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=80)
    return buffer.getvalue()


def paged_document_spec(rng: np.random.Generator, doc: int, n_pages: int, size=(595, 842),
                        other_size_every: int = 0, image_every: int = 3) -> list[dict]:
    """Pages of a made-up report: a heading, paragraphs of made-up words (each paragraph a block
    of lines), a coloured figure (vector) and on some pages an embedded photo. Every element's
    box (points, top-left origin) is recorded under ``"blocks"`` as (kind, box, text)."""
    pyrng = random.Random(int(rng.integers(1 << 30)))
    hue = rng.random(3)
    pages = []
    for p in range(n_pages):
        width, height = (size[1], size[0]) if other_size_every and p % other_size_every == other_size_every - 1 else size
        lines, blocks, rects, images = [], [], [], []
        y = 40.0
        heading = f"{made_up_word(pyrng).title()} {made_up_word(pyrng).title()} {doc}-{p}"
        lines.append((50, y, 16, heading))
        blocks.append(("heading", (50, y, width - 50, y + 18), heading))
        y += 30
        for _ in range(pyrng.randint(2, 3)):
            sentences = [" ".join(made_up_word(pyrng) for _ in range(pyrng.randint(5, 9))).capitalize() + "."
                         for _ in range(pyrng.randint(3, 5))]
            text = " ".join(sentences)
            words, row, top = text.split(), [], y
            for word in words:
                row.append(word)
                if len(" ".join(row)) > (width - 100) / 5.5:
                    lines.append((50, y, 10, " ".join(row)))
                    y += 13
                    row = []
            if row:
                lines.append((50, y, 10, " ".join(row)))
                y += 13
            blocks.append(("text", (48, top - 1, width - 48, y + 1), text))
            y += 12
        fw, fh = 200 + 60 * rng.random(), 120 + 40 * rng.random()
        colour = tuple(float(c) for c in (hue * 0.6 + 0.4 * rng.random(3)))
        rects.append((60, y, fw, fh, colour))
        rects.append((70 + 20 * (p % 5), y + 10, fw / 3, fh / 2, tuple(1 - c for c in colour)))
        blocks.append(("figure", (58, y - 2, 62 + fw, y + fh + 2), ""))
        if image_every and p % image_every == 1 and y + fh + 150 < height:
            data = _noise_jpeg(rng, 96, 72)
            images.append((width - 260, y + fh + 20, 160, 120, data, 96, 72))
            blocks.append(("photo", (width - 260, y + fh + 20, width - 100, y + fh + 140), ""))
        pages.append({"size": (width, height), "lines": lines, "rects": rects, "images": images, "blocks": blocks})
    return pages


def photo(seed: int, side: int = 96) -> bytes:
    """A noise JPEG photo (distinct per seed): an image that does not compress away."""
    import io

    from PIL import Image

    pixels = (np.random.default_rng(seed).random((side, side, 3)) * 255).astype("uint8")
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def pool_with_images(target: int, images: list[bytes], n_queries: int = 3, dataset: str = "fixture"):
    """A small pool whose every candidate (a few words, then ``images``) places all of ``images``."""
    from mmlongembed.core.documents import image_segment, text_document
    from mmlongembed.core.pools import EASY_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query
    from mmlongembed.core.tokens import default_counter

    counter = default_counter()
    pool = Pool(name=f"{dataset}-easy-{target}", task="logical_summarization", dataset=dataset, difficulty="easy",
                band=LengthBand(target=target, lo=1, hi=10 ** 6), modality="mixed")
    pictures = tuple(image_segment(image, 96, 96) for image in images)  # the same segments in every candidate
    for q in range(n_queries):
        pool.queries.append(Query(id=f"q{q}", text=f"Question {q} about stones?", instruction="Find it.",
                                  source_id=str(q), n_tokens=counter.count(f"Question {q} about stones?")))
        for k, role in enumerate((POSITIVE, EASY_NEGATIVE)):
            cid = f"d{q}-{k}"
            words = text_document(cid, f"Document {q} {k} speaks of river stones and lanterns.", counter)
            document = words.with_segments(words.segments + pictures)
            pool.candidates.append(Candidate(id=cid, document=document, role=role, group=f"q{q}", source_id=cid,
                                             n_tokens=document.tokens))
        pool.qrels.append((f"q{q}", f"d{q}-0", 1))
    return pool
