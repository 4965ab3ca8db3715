"""The Visual Grounding builder's sources: NeedleBench needles and names, and the haystacks (text
and photos), read from a local tree in the shared-data layout or from the Hub (NeedleBench and
OBELICS, each at a pinned revision).

``config`` below is the builder's ``NeedleConfig``; the readers use its ``language``,
``backgrounds``, ``hub_documents``, ``hub_images`` and ``image_timeout``.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.needles.text import surnames
from mmlongembed.readers.sources import (
    HubSource, fetch_url, hub_file, hub_rows, iter_jsonl, read_json, read_text_file, require_dir)
from mmlongembed.core.text import normalise_newlines

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
_PG_START = re.compile(r"\*\*\*\s*START OF (?:THE|THIS) PROJECT GUTENBERG[^\n]*\n")
_PG_END = re.compile(r"\*\*\*\s*END OF (?:THE|THIS) PROJECT GUTENBERG")
_WIKI_TITLE = re.compile(r"^ ?= ([^=].*?) = ?$")
_WIKI_HEADING = re.compile(r"^ ?(?:= )+(.*?)(?: =)+ ?$")
# Without --sources: needles and names from NeedleBench, haystack text and photos from OBELICS
# (web documents with interleaved images given as URLs), each at a pinned revision.
NEEDLEBENCH = HubSource(repo="opencompass/NeedleBench", revision="bb30238fea08590e7b9b8021a40b51d44b105e55",
                        licence="MIT")
NEEDLEBENCH_FILES = ("needles.jsonl", "names.json")
OBELICS = HubSource(repo="HuggingFaceM4/OBELICS", revision="692b1477acc9c9430c8991d987cf7ca4a2efc064",
                    config="default", split="train", licence="CC BY 4.0 (images: their own licences)")


@dataclass
class Sources:
    needle_records: list[dict]
    names: list[str]
    documents: list[tuple[str, str]]  # (source id, text) of the text haystack, in document order
    photos: list[tuple[str, object]]  # (source id, PIL RGB image)


def _rewrap(text: str) -> str:
    """Hard-wrapped plain text (Gutenberg, the essays) -> one paragraph per line, so that the
    splitter sees paragraphs, not wrapped lines."""
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return "\n".join(p for p in paragraphs if p) + "\n"


def _wikitext_articles(raw: str) -> list[tuple[str, str]]:
    """WikiText-2 raw: articles open with ' = Title = '; section headings become plain lines and the
    tokenisation escapes (' @-@ ', ' @,@ ', ' @.@ ') are undone."""
    articles: list[tuple[str, list[str]]] = []
    for line in normalise_newlines(raw).split("\n"):
        title = _WIKI_TITLE.match(line)
        if title:
            articles.append((title.group(1).strip(), []))
            continue
        if not line.strip() or not articles:
            continue
        heading = _WIKI_HEADING.match(line)
        text = heading.group(1) if heading else line
        text = text.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".").strip()
        articles[-1][1].append(text)
    return [(f"wikitext:{t}", "\n".join(lines) + "\n") for t, lines in articles if lines]


def _gutenberg_body(text: str) -> str:
    start, end = _PG_START.search(text), _PG_END.search(text)
    return text[start.end() if start else 0: end.start() if end else len(text)]


def read_local_sources(root: Path, config, report: BuildReport) -> Sources:
    needle_dir = require_dir(root / "needlebench", "NeedleBench needles.jsonl, names.json, PaulGrahamEssays.jsonl")
    needles_path, names_path = needle_dir / "needles.jsonl", needle_dir / "names.json"
    for path in (needles_path, names_path):
        if not path.is_file():
            raise UserError(f"missing {path} (NeedleBench needles and names)")
    names_text = _names(read_json(names_path, report), config.language, str(names_path))
    documents: list[tuple[str, str]] = []
    essays = needle_dir / "PaulGrahamEssays.jsonl"
    if essays.is_file():
        for number, record in enumerate(iter_jsonl(essays, report), 1):
            text = record.get("text")
            if not isinstance(text, str) or not text.strip():
                report.skip("empty_haystack_text", f"{essays.name}:{number}")
                continue
            documents.append((f"paulgraham:{record.get('title') or number}", _rewrap(normalise_newlines(text))))
    text_root = root / "haystack_text"
    if text_root.is_dir():
        for path in sorted(text_root.rglob("*")):
            if path.suffix not in (".txt", ".raw") or not path.is_file():
                continue
            raw = read_text_file(path, report)
            if raw is None:
                continue
            if path.suffix == ".raw":
                documents.extend(_wikitext_articles(raw))
            else:
                documents.append((f"gutenberg:{path.stem}", _rewrap(_gutenberg_body(normalise_newlines(raw)))))
    if not documents:
        raise UserError(f"no haystack text under {root} (needlebench/PaulGrahamEssays.jsonl or haystack_text/)")
    photos = []
    image_root = root / "images"
    if image_root.is_dir():
        from PIL import Image, UnidentifiedImageError

        for path in sorted(image_root.iterdir()):
            if path.suffix.lower() not in IMAGE_EXTENSIONS:
                continue
            try:
                with Image.open(path) as im:
                    photos.append((f"image:{path.name}", im.convert("RGB")))
            except (OSError, UnidentifiedImageError):
                report.skip("unreadable_image", path.name)
    if not photos and {"mixed", "image"} & set(config.backgrounds):
        raise UserError(f"no haystack images under {image_root}: the mixed and image backgrounds need them")
    records = list(iter_jsonl(needles_path, report))
    return Sources(records, surnames(names_text), documents, photos)


def local_source_paths(root: Path) -> list[Path]:
    """The files of a local source tree that a build reads (its source identity hashes them)."""
    paths = [*sorted((root / "needlebench").glob("needles.jsonl")), *sorted((root / "needlebench").glob("names.json")),
             *sorted((root / "needlebench").glob("PaulGrahamEssays.jsonl"))]
    if (root / "haystack_text").is_dir():
        paths += [p for p in sorted((root / "haystack_text").rglob("*")) if p.suffix in (".txt", ".raw")]
    if (root / "images").is_dir():
        paths += [p for p in sorted((root / "images").iterdir()) if p.suffix.lower() in IMAGE_EXTENSIONS]
    return paths


def _names(names_obj, language: str, where: str) -> str:
    names_text = names_obj.get(language, "") if isinstance(names_obj, dict) else ""
    if not isinstance(names_text, str) or not names_text:
        raise UserError(f"{where} has no {language!r} names")
    return names_text


def fetch_photo(url: str, timeout: float, report: BuildReport):
    """One haystack photo from its URL as a PIL RGB image, or None (counted by reason)."""
    import http.client

    from PIL import Image, UnidentifiedImageError

    try:
        data = fetch_url(url, timeout)
    except (OSError, ValueError, http.client.HTTPException):
        report.skip("image_fetch_failed", url[:120])
        return None
    try:
        with Image.open(io.BytesIO(data)) as im:
            return im.convert("RGB")
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError):
        report.skip("unreadable_image", url[:120])
        return None


def read_hub_sources(config, builder_name: str, report: BuildReport) -> Sources:
    """NeedleBench needles and names, and OBELICS haystacks: each document's text pieces (in
    order) become one haystack text, its images are fetched from their URLs until
    ``hub_images`` photos are in hand (the image and mixed backgrounds need them)."""
    needles_path, names_path = (hub_file(NEEDLEBENCH, name, builder_name) for name in NEEDLEBENCH_FILES)
    names_text = _names(read_json(names_path, report), config.language, f"{NEEDLEBENCH.repo} names.json")
    records = list(iter_jsonl(needles_path, report))
    want_photos = bool({"mixed", "image"} & set(config.backgrounds))
    documents: list[tuple[str, str]] = []
    photos: list[tuple[str, object]] = []
    seen_urls: set[str] = set()
    most_rows = 10 * max(config.hub_documents, config.hub_images, 1)  # a stream whose images all fail ends too
    for number, row in enumerate(hub_rows(OBELICS, builder_name)):
        if number >= most_rows:
            report.notes.append(f"stopped reading {OBELICS.repo} after {most_rows} documents")
            break
        texts, images = row.get("texts") or [], row.get("images") or []
        if not isinstance(texts, list) or not isinstance(images, list):
            report.skip("malformed_obelics_row", str(number))
            continue
        doc_id = f"obelics:{number}"
        if len(documents) < config.hub_documents:
            pieces = [normalise_newlines(t).strip() for t in texts if isinstance(t, str) and t.strip()]
            if pieces:
                documents.append((doc_id, _rewrap("\n\n".join(pieces))))
            else:
                report.skip("empty_haystack_text", doc_id)
        if want_photos:
            for k, url in enumerate(images):
                if len(photos) >= config.hub_images:
                    break
                if not isinstance(url, str) or url in seen_urls:
                    continue
                seen_urls.add(url)
                photo = fetch_photo(url, config.image_timeout, report)
                if photo is not None:
                    photos.append((f"{doc_id}:image{k}", photo))
        if len(documents) >= config.hub_documents and (not want_photos or len(photos) >= config.hub_images):
            break
    if not documents:
        raise UserError(f"no haystack text in {OBELICS.repo}@{OBELICS.revision[:12]}")
    if want_photos and not photos:
        raise UserError("no OBELICS image could be fetched (see the image_fetch_failed count); the mixed and image "
                        "backgrounds need them: pass --backgrounds text, or --sources DIR with images/")
    return Sources(records, surnames(names_text), documents, photos)


LOCAL_CARD_SOURCES = [
    {"name": "NeedleBench needles and names (OpenCompass)", "licence": "not stated",
     "identity": "local `needlebench/needles.jsonl`, `names.json` (sha256 in manifest.json)"},
    {"name": "Haystack text: WikiText-2 raw test, Project Gutenberg books, Paul Graham essays",
     "licence": "CC BY-SA 3.0 / public domain / copyrighted (see the caveats)",
     "identity": "local `haystack_text/`, `needlebench/PaulGrahamEssays.jsonl` (sha256 in manifest.json)"},
    {"name": "Haystack images: scikit-image sample photos", "licence": "public domain / CC0",
     "identity": "local `images/` (sha256 in manifest.json)"},
    {"name": "Image needles", "licence": "generated by this toolkit",
     "identity": "drawn from their specs (stored with each query and pool)"},
]


def card_sources(local: bool) -> list[dict]:
    """The card's list of sources (name, licence, identity) of a local or a Hub build."""
    if local:
        return LOCAL_CARD_SOURCES
    return [
        {"name": "NeedleBench needles and names (OpenCompass)", "licence": NEEDLEBENCH.licence,
         "identity": f"`{NEEDLEBENCH.repo}` @ `{NEEDLEBENCH.revision}` ({', '.join(NEEDLEBENCH_FILES)})"},
        {"name": "Haystack text and photos: OBELICS web documents (images fetched from their URLs)",
         "licence": OBELICS.licence,
         "identity": f"`{OBELICS.repo}` `{OBELICS.config}` @ `{OBELICS.revision}`"},
        {"name": "Image needles", "licence": "generated by this toolkit",
         "identity": "drawn from their specs (stored with each query and pool)"},
    ]
