"""`mmle explore DIR [--results RES...] [--output SITE] [--serve]`: a static site to look inside a
built benchmark (and, given `mmle score` runs, at what each model picked).

The site opens from disk (file://, no server): an index.html, its script and style, and the data as
JavaScript files loaded through <script src> (a browser refuses fetch() of local JSON files). The
release's Table 1, Figure 1 and pools table come in `data/release.js`; each pool's queries and
candidates in `data/pool-NNN.js`, loaded when the pool is opened. Candidate texts are stored once
per pool as sentences (a hard negative shares all but its edit with its positive), images once in
the whole site as thumbnails named by content. The pages mark what each edit changed
(harness.explore.marks), and show each model's pick and the positive's rank per query.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import io
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from harness.explore.marks import image_edits, piece_edits, pieces
from mmlongembed.core.errors import UserError, report_error

ASSETS = ("index.html", "app.js", "style.css")
IMAGE_PLACEHOLDER = "<|image|>"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", metavar="DIR", help="a built benchmark directory (e.g. out/mmlongembed)")
    parser.add_argument("--results", nargs="+", default=[], metavar="RES",
                        help="`mmle score` output directories (results.json + predictions.parquet) of runs on "
                             "this benchmark (one model's pools may come from several runs, each pool from one): "
                             "the site then shows each model's pick and rank per query, the "
                             "variant-confusion table and a filter for the queries a model got wrong")
    parser.add_argument("--output", default=None,
                        help="folder to write the site into (default: explore/<DIR's name>); replaced if it holds "
                             "an earlier site")
    parser.add_argument("--serve", action="store_true",
                        help="after writing, serve the site on http://127.0.0.1:PORT until Ctrl-C (it opens from "
                             "disk too: the server is only a convenience)")
    parser.add_argument("--port", type=int, default=8765, help="port of --serve (default 8765; 0: any free one)")
    parser.add_argument("--thumbnail", type=int, default=320,
                        help="longest side of the stored image thumbnails in pixels (default 320): bounds the "
                             "site's image bytes")
    parser.add_argument("--jobs", type=int, default=default_jobs(),
                        help=f"worker processes that read and mark the pools (default {default_jobs()}: this "
                             "machine's CPUs, at most 8); 1 works in this process. The site is the same for any "
                             "number")
    parser.add_argument("--quiet", action="store_true", help="no progress bar; only the summary line")


def default_jobs() -> int:
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def run(args: argparse.Namespace) -> int:
    try:
        root = Path(args.dataset)
        if not (root / "README.md").is_file():
            raise UserError(f"{root}: not a built benchmark (no README.md with its configs)")
        output = Path(args.output) if args.output else Path("explore") / root.resolve().name
        if args.thumbnail < 32:
            raise UserError("--thumbnail must be at least 32 pixels")
        if args.jobs < 1:
            raise UserError("--jobs must be at least 1")
        summary = build_site(root, [Path(r) for r in args.results], output, thumbnail=args.thumbnail,
                             progress=not args.quiet, jobs=args.jobs)
    except UserError as exc:
        return report_error(exc)
    print(summary.line(output))
    if args.serve:
        serve(output, args.port)
    return 0


@dataclass
class SiteSummary:
    pools: int = 0
    queries: int = 0
    candidates: int = 0
    images: int = 0
    site_bytes: int = 0
    image_bytes: int = 0
    release_bytes: int = 0
    seconds: float = 0.0
    models: list[str] = field(default_factory=list)

    def line(self, output: Path) -> str:
        mb = 1e6  # MB as every summary of the toolkit counts them (the build's storage line too)
        return (f"wrote {output / 'index.html'}: {self.pools} pools, {self.queries} queries, {self.candidates} "
                f"candidates, {self.images} distinct images"
                + (f", picks of {', '.join(self.models)}" if self.models else "")
                + f"; site {self.site_bytes / mb:.1f} MB (thumbnails {self.image_bytes / mb:.1f} MB) against the "
                  f"release's {self.release_bytes / mb:.1f} MB of data files; built in {self.seconds:.1f} s")


class ImageStore:
    """Each distinct image once, as a thumbnail named by the sha256 of the original's bytes."""

    def __init__(self, folder: Path, longest_side: int):
        self.folder, self.longest_side = folder, longest_side
        folder.mkdir(parents=True, exist_ok=True)
        self.known: dict[str, list] = {}  # key -> [file name, width, height] of the thumbnail
        self.sizes: dict[str, int] = {}  # key -> the thumbnail's bytes

    @property
    def bytes(self) -> int:
        return sum(self.sizes.values())

    def merge(self, known: dict[str, list], sizes: dict[str, int]) -> None:
        """Thumbnails another process wrote into the same folder (the same content, the same name)."""
        self.known.update(known)
        self.sizes.update(sizes)

    def add(self, data: bytes) -> str:
        key = hashlib.sha256(data).hexdigest()[:20]
        if key not in self.known:
            self.known[key] = self._write(key, data)
        return key

    def _write(self, key: str, data: bytes) -> list:
        from PIL import Image

        image = Image.open(io.BytesIO(data))
        image.draft("RGB", (self.longest_side, self.longest_side))  # JPEG: decode at a reduced scale
        image = image.convert("RGB")
        image.thumbnail((self.longest_side, self.longest_side))
        name = f"{key}.jpg"
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=82)
        # worker processes may write the same image at once: each writes its own file, then renames
        partial = self.folder / f"{name}.{os.getpid()}.partial"
        partial.write_bytes(buffer.getvalue())
        os.replace(partial, self.folder / name)
        self.sizes[key] = buffer.tell()
        return [name, image.width, image.height]


class TextStore:
    """A pool's candidate texts as sentence pieces, each distinct piece once."""

    def __init__(self):
        self.pieces: list[str] = []
        self._index: dict[str, int] = {}

    def add(self, text: str) -> list[int]:
        out = []
        for piece in pieces(text):
            if piece not in self._index:
                self._index[piece] = len(self.pieces)
                self.pieces.append(piece)
            out.append(self._index[piece])
        return out


@functools.lru_cache(maxsize=6)
def _parquet(path: Path):
    import pyarrow.parquet as pq

    return pq.read_table(path)


def _pool_part(root: Path, specs: dict, pool: str, part: str) -> list[dict]:
    """One config of one pool as rows, read through its shard file (each file read once in a row)."""
    import pyarrow.compute as pc

    from mmlongembed.output.layout import POOL_COLUMN, config_name

    spec = specs.get(config_name(pool, part))
    if spec is None:
        return []
    table = _parquet(root / spec.path)
    if spec.pool is not None and POOL_COLUMN in table.column_names:
        table = table.filter(pc.field(POOL_COLUMN) == spec.pool)
    columns = [c for c in (spec.columns or table.column_names) if c in table.column_names]
    return table.select(columns).to_pylist()


def _json(value) -> dict:
    try:
        return json.loads(value) if isinstance(value, str) and value else {}
    except ValueError:
        return {}


def _word_stats(candidates: list[dict], texts: TextStore) -> None:
    """Each text candidate's word statistics (mmlongembed.ops.wordstats, what the shortcut audit
    reads): counted on its text, or for a hard negative, from its positive's counts with the
    edit's pieces taken out and put in (exact: pieces end at sentence ends, so the counts add).
    Only positives' counts are kept, while the pool is made (memory: a pool's positives)."""
    from mmlongembed.ops.wordstats import WordStats, features_replacing

    def of(ids) -> WordStats:
        return WordStats.of("".join(texts.pieces[k] for k in ids).replace(IMAGE_PLACEHOLDER, " "))

    kept: dict[int, WordStats] = {}
    for index, candidate in enumerate(candidates):
        edit = candidate.pop("_edit", None)
        if not any(texts.pieces[k].replace(IMAGE_PLACEHOLDER, "").strip() for k in candidate["text"]):
            continue
        if edit is not None:
            positive, removed, inserted = edit
            if positive not in kept:
                kept[positive] = of(candidates[positive]["text"])
            features = features_replacing(kept[positive], of(removed), of(inserted))
        else:
            kept[index] = stats = kept.get(index) or of(candidate["text"])
            features = stats.features()
            if candidate["role"] != "positive":
                del kept[index]
        candidate["word_stats"] = {k: round(v, 3) for k, v in features.items()}


AUDIT_EXTRAS = ("depth", "realised_depth", "block_of_frame", "frame_pts", "video_id", "needle_modality")


def _candidate(row: dict, audit: dict, texts: TextStore, images: ImageStore) -> dict:
    provenance = _json(audit.get("provenance"))
    text = row.get("text") or ""
    out = {"id": row["_id"], "role": audit.get("role") or "", "variant": audit.get("variant") or "",
           "group": audit.get("group") or "", "internal_id": audit.get("internal_id") or "",
           "provenance": provenance, "n_tokens": row.get("n_tokens"), "n_text_tokens": row.get("n_text_tokens"),
           "n_image_tokens": row.get("n_image_tokens"), "chars": len(text), "text": texts.add(text),
           "images": [images.add(im["bytes"]) for im in row.get("images") or [] if im and im.get("bytes")],
           "word_stats": None,
           "marks": [], "image_marks": []}
    for column in AUDIT_EXTRAS:
        if audit.get(column) is not None:
            out[column] = audit[column]
    if isinstance(provenance.get("needle_char_range"), list) and provenance.get("needle_modality") == "text":
        a, b = provenance["needle_char_range"]
        out["marks"].append({"start": a, "end": b, "kind": "needle", "label": "needle"})
    if provenance.get("needle_image_index") is not None:
        out["image_marks"].append({"index": provenance["needle_image_index"], "kind": "needle", "label": "needle"})
    return out


def _edit_label(variant: dict) -> str:
    """What replaced the positive's text in a variant, as its provenance says (refill, donor)."""
    provenance = variant["provenance"]
    if provenance.get("removed"):
        sources = sorted({r.get("replacement", {}).get("source", "?") for r in provenance["removed"]})
        return f"{variant['variant']}: refill from {', '.join(sources)}"
    donor = provenance.get("donor") or provenance.get("donor_id")
    if donor:
        return f"{variant['variant']}: donor block from {donor if isinstance(donor, str) else json.dumps(donor)}"
    return f"{variant['variant']}: put in place of the positive's"


def _mark_edits(candidates: list[dict], positive: int, variants: list[int], texts: TextStore) -> None:
    """Each hard negative against its positive: removed sentences on the positive, what replaced
    them on the variant (and the edit's pieces, for its word statistics); swapped images on both."""
    pos = candidates[positive]
    for variant in (candidates[k] for k in variants):
        edits = piece_edits(pos["text"], variant["text"], texts.pieces)
        if edits:
            removed, inserted = edits
            variant["_edit"] = (positive, [k for r in removed for k in r.pop("pieces")],
                                [k for r in inserted for k in r.pop("pieces")])
            pos["marks"] += [{**r, "kind": "removed", "label": f"absent from {variant['variant']}",
                              "variant": variant["variant"]} for r in removed]
            variant["marks"] += [{**r, "kind": "inserted", "label": _edit_label(variant)} for r in inserted]
        if pos["images"] and variant["images"] and not variant.get("block_of_frame"):
            out, into = image_edits(pos["images"], variant["images"])
            pos["image_marks"] += [{"index": i, "kind": "removed", "label": f"absent from {variant['variant']}"}
                                   for i in out]
            donor = variant["provenance"].get("donor_pages")
            where = f" (from pages {donor[0] + 1}-{donor[1]} of the document)" if isinstance(donor, list) and len(donor) == 2 else ""
            variant["image_marks"] += [{"index": i, "kind": "inserted", "label": f"{variant['variant']}: swapped in{where}"}
                                       for i in into]


def pool_payload(root: Path, specs: dict, row: dict, images: ImageStore) -> dict:
    """Everything the site shows of one pool: its queries, each with the candidates made for it
    (positive first), every candidate's text pieces, images, marks and audit facts."""
    name = row["pool"]
    audit = {a["_id"]: a for a in _pool_part(root, specs, name, "audit")}
    texts = TextStore()
    candidates = [_candidate(r, audit.get(r["_id"], {}), texts, images)
                  for r in _pool_part(root, specs, name, "corpus")]
    at = {c["id"]: k for k, c in enumerate(candidates)}
    positive_of = {q["query-id"]: q["corpus-id"] for q in _pool_part(root, specs, name, "qrels") if q["score"] > 0}

    queries = []
    for q in _pool_part(root, specs, name, "queries"):
        mine = [k for k, c in enumerate(candidates) if c["group"] == q["_id"]]
        positive = at.get(positive_of.get(q["_id"]))
        order = {"positive": 0, "hard_negative": 1, "easy_negative": 2}
        mine.sort(key=lambda k: (k != positive, order.get(candidates[k]["role"], 3), candidates[k]["variant"]))
        if positive is not None and positive not in mine:
            mine.insert(0, positive)
        if positive is not None:
            _mark_edits(candidates, positive, [k for k in mine if candidates[k]["role"] == "hard_negative"], texts)
        queries.append({"id": q["_id"], "text": q.get("text") or "", "instruction": q.get("instruction") or "",
                        "n_tokens": q.get("n_tokens"),
                        "images": [images.add(im["bytes"]) for im in q.get("images") or [] if im and im.get("bytes")],
                        "positive": positive, "candidates": mine,
                        "source_id": (audit.get(q["_id"]) or {}).get("source_id")})
    _word_stats(candidates, texts)
    return {"pool": name, "facts": {k: v for k, v in row.items()}, "queries": queries, "candidates": candidates,
            "pieces": texts.pieces, "results": {}}


def _release_facts(root: Path, rows: list[dict]) -> dict:
    from mmlongembed.release.tables import measured_table1, paper_table1

    manifest = _json((root / "manifest.json").read_text(encoding="utf-8")) if (root / "manifest.json").is_file() else {}
    return {"name": root.resolve().name, "table1": measured_table1(rows), "paper_table1": paper_table1(),
            "synthetic": manifest.get("synthetic"), "absent": manifest.get("absent"),
            "components": [{k: c.get(k) for k in ("builder", "version")} for c in manifest.get("components") or []]}


def _copy_figures(root: Path, output: Path) -> list[str]:
    """Figure 1 of a release (or a single build's length histogram), copied beside the page."""
    out = []
    for relative in ("figures/figure1_candidate_lengths.png", "figures/length_histogram.png"):
        if (root / relative).is_file():
            (output / "figures").mkdir(exist_ok=True)
            shutil.copyfile(root / relative, output / relative)
            out.append(relative)
    return out


def _release_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in (root / "data").rglob("*.parquet"))


def _write_js(path: Path, variable: str, key: str | None, value) -> int:
    body = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    target = f"window.{variable}" + (f"[{json.dumps(key)}]" if key is not None else "")
    text = f"window.{variable} = window.{variable} || {{}};\n{target} = {body};\n" if key is not None else \
        f"{target} = {body};\n"
    path.write_text(text, encoding="utf-8")
    return path.stat().st_size


def build_site(root: Path, results: list[Path], output: Path, thumbnail: int = 320, progress: bool = True,
               jobs: int = 1) -> SiteSummary:
    """Write the site into a fresh folder beside ``output``, then put it in ``output``'s place (an
    earlier site there is replaced; nothing half-written is left if the build fails)."""
    from mmlongembed.output.layout import configs_from_card, pool_rows

    from harness.explore.results import load_runs

    started = time.perf_counter()
    specs = configs_from_card(root / "README.md")
    rows = pool_rows(root, specs)
    runs = load_runs(results, {r["pool"] for r in rows})
    _check_output(output)
    partial = output.parent / f".{output.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        summary = _write_site(root, specs, rows, runs, partial, thumbnail, progress, jobs)
        shutil.rmtree(output, ignore_errors=True)
        partial.rename(output)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    summary.seconds = time.perf_counter() - started
    return summary


def _write_site(root: Path, specs: dict, rows: list[dict], runs, folder: Path, thumbnail: int, progress: bool,
                jobs: int) -> SiteSummary:
    from harness.explore.results import attach_results

    folder.mkdir(parents=True)
    for asset in ASSETS:
        (folder / asset).write_bytes(resources.files("harness.explore").joinpath("assets", asset).read_bytes())
    (folder / "data").mkdir()
    images = ImageStore(folder / "img", thumbnail)
    summary = SiteSummary(models=runs.models)
    listing = []
    ordered = sorted(enumerate(rows), key=lambda kv: specs.get(f"{kv[1]['pool']}-corpus").path
                     if specs.get(f"{kv[1]['pool']}-corpus") else "")
    bar = _bar(len(rows), progress)
    for (k, row), payload in zip(ordered, _pool_payloads(root, specs, [r for _, r in ordered], images, jobs)):
        overview = attach_results(payload, runs)
        file = f"data/pool-{k:03d}.js"
        _write_js(folder / file, "MMLE_POOLS", row["pool"], payload)
        listing.append((k, {**{c: row.get(c) for c in ("pool", "task", "dataset", "difficulty", "length", "depth",
                                                          "modality", "query_modality", "n_queries", "n_candidates")},
                            "file": file, "models": overview}))
        summary.pools += 1
        summary.queries += len(payload["queries"])
        summary.candidates += len(payload["candidates"])
        bar.update(1)
    bar.close()
    _parquet.cache_clear()
    release = {**_release_facts(root, rows), "figures": _copy_figures(root, folder),
               "pools": [entry for _, entry in sorted(listing)], "models": runs.models,
               "confusion": runs.confusion, "runs": runs.sources}
    summary.images, summary.image_bytes = len(images.known), images.bytes
    summary.release_bytes = _release_bytes(root)
    release["images"] = dict(sorted(images.known.items()))
    release["size"] = {"site_bytes": 0, "image_bytes": images.bytes, "images": len(images.known),
                       "release_bytes": summary.release_bytes}
    _write_js(folder / "data" / "release.js", "MMLE_RELEASE", None, release)
    # the stated size includes this file: written once to measure, then again with the figure
    release["size"]["site_bytes"] = _folder_bytes(folder)
    _write_js(folder / "data" / "release.js", "MMLE_RELEASE", None, release)
    summary.site_bytes = _folder_bytes(folder)
    return summary


def _pool_payloads(root: Path, specs: dict, rows: list[dict], images: ImageStore, jobs: int):
    """Each pool's payload, in ``rows``' order. With ``jobs`` > 1 the pools are spread over worker
    processes in runs of neighbours (pools that share a data file stay together, each file read
    once per run); each worker writes its thumbnails into the same folder and reports them back."""
    if jobs <= 1 or len(rows) < 2:
        for row in rows:
            yield pool_payload(root, specs, row, images)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    tasks = [(root, specs, row, images.folder, images.longest_side) for row in rows]
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as executor:
        for payload, known, sizes in executor.map(_worker_payload, tasks, chunksize=max(1, len(tasks) // (4 * jobs))):
            images.merge(known, sizes)
            yield payload


_WORKER_IMAGES: dict[Path, ImageStore] = {}  # a worker process's thumbnails, for the site it works on


def _worker_payload(task) -> tuple[dict, dict, dict]:
    root, specs, row, folder, thumbnail = task
    images = _WORKER_IMAGES.setdefault(folder, ImageStore(folder, thumbnail))
    before = set(images.known)
    payload = pool_payload(root, specs, row, images)
    new = [key for key in images.known if key not in before]
    return payload, {k: images.known[k] for k in new}, {k: images.sizes[k] for k in new}


def _bar(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="pools", unit="pool", disable=not enabled)


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _check_output(output: Path) -> None:
    """``output`` may be replaced: it is absent, empty, or an earlier site."""
    if output.exists() and not ((output / "index.html").is_file() and (output / "data" / "release.js").is_file()):
        if not output.is_dir() or any(output.iterdir()):
            raise UserError(f"{output}: exists and is not an earlier `mmle explore` site; give another --output")


def serve(folder: Path, port: int) -> None:
    import functools as ft
    import http.server

    handler = ft.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"serving {folder} on http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C to stop)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mmle explore", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
