"""Small demo sources for the video builders, so a newcomer can try them offline.

ActivityNet and YoukuDC videos cannot be shipped (YouTube and Youku videos; the YoukuDC release
is on ModelScope). This writes generated clips (random-noise scenes, 64x48 pixels) with made-up
dense captions in the real formats, one subfolder per source, in the layout of ``../shared/data``:

- ``DIR/activitynet_captions/val_1.json``: ActivityNet Captions JSON (``{v_<id>: {duration,
  timestamps, sentences}}``), with the clips in ``DIR/videos/`` (``v_<id>.mp4``, some without
  the ``v_`` prefix as some mirrors name them); build with ``--sources DIR``;
- ``DIR/youkudc/``: the YoukuDC release layout (``meta_files/<Category>.csv`` +
  ``data_files/<Category>/{train.zip,test/}``: one category's clips zipped as the release ships its
  train split) with made-up Chinese captions, and ``translations.json`` for
  the loopback translator (``python -m mmlongembed.llm.fake_captions``); build with
  ``--sources DIR/youkudc``.

Every folder holds a ``SYNTHETIC`` marker, so the cards and manifests of builds made from them
say so (and ``mmle push`` must never publish them). Frames are 4 tokens each, so build with
``--lengths 48 96`` (the paper's 8K-32K pools need real videos). Run::

    mmle demo-sources DIR        # or: python -m mmlongembed.demo_sources DIR
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mmlongembed.core.errors import UserError, report_error

ACTIVITYNET_DIR = "activitynet_captions"
VIDEOS_DIR = "videos"
YOUKUDC_DIR = "youkudc"
TRANSLATIONS_FILE = "translations.json"
DEMO_NOTE = ("SYNTHETIC demo sources written by `mmle demo-sources`: generated noise clips with made-up captions. "
             "Never publish a build made from them.")


def demo_commands(root: Path) -> list[str]:
    """The commands that build both demo sources (printed, and written to DIR/README.md)."""
    from builders._temporal_fixtures import TEMPORAL_FIXTURE_LENGTHS

    lengths = " ".join(str(n) for n in TEMPORAL_FIXTURE_LENGTHS)
    return [
        f"mmle build activitynet --sources {root} --lengths {lengths} --max-queries-per-pool 3",
        f"python -m mmlongembed.llm.fake_captions --translations {root / YOUKUDC_DIR / TRANSLATIONS_FILE}"
        "   # prints URL; keep it running",
        f"mmle build youkudc --sources {root / YOUKUDC_DIR} --lengths {lengths} --max-queries-per-pool 3 "
        "--llm openai --llm-base-url URL --llm-model fake-model",
    ]


def zip_split(root: Path, category: str, split: str = "train") -> int:
    """Move a YoukuDC release category's ``test/`` clips into ``data_files/<Category>/<split>.zip``
    (members ``<split>/<name>``) and point its CSV rows there, as the release ships ``train`` and
    ``val``. Returns the number of clips moved."""
    import csv
    import zipfile

    folder = root / "data_files" / category
    clips = sorted((folder / "test").glob("*.mp4"))
    with zipfile.ZipFile(folder / f"{split}.zip", "w") as archive:
        for clip in clips:
            archive.write(clip, f"{split}/{clip.name}")
            clip.unlink()
    (folder / "test").rmdir()
    meta = root / "meta_files" / f"{category}.csv"
    with open(meta, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        fields, rows = list(reader.fieldnames or []), list(reader)
    for row in rows:
        for column in fields:
            if row[column].startswith(f"{category}/test/"):
                row[column] = row[column].replace(f"{category}/test/", f"{category}/{split}/", 1)
    with open(meta, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return len(clips)


def write_demo_sources(root: Path, n_videos: int = 16, seed: int = 5) -> dict[str, Path]:
    """Write both demo sources under ``root`` (refusing to write into an existing subfolder);
    returns {source: folder to pass as --sources}."""
    from builders._temporal_fixtures import write_temporal_sources
    from mmlongembed.testing import mark_synthetic

    try:
        import av  # noqa: F401  (the clips are encoded with PyAV)
    except ImportError:
        raise UserError("demo-sources writes videos with PyAV: pip install 'mmlongembed[video]'") from None
    if n_videos < 4:
        raise UserError(f"--videos {n_videos}: a query needs three other videos as easy negatives; use 4 or more")
    root = Path(root)
    existing = [name for name in (ACTIVITYNET_DIR, VIDEOS_DIR, YOUKUDC_DIR) if (root / name).exists()]
    if existing:
        raise UserError(f"{root} already has {', '.join(existing)}/: choose an empty or new directory")
    write_temporal_sources(root, n_videos=n_videos, seed=seed, annotations_dir=ACTIVITYNET_DIR, videos_dir=VIDEOS_DIR)
    # Different ids and clips from the ActivityNet demo: the activitynet build reads every video under DIR.
    translations = write_temporal_sources(root / YOUKUDC_DIR, n_videos=n_videos, seed=seed + 1, language="zh",
                                          layout="youku", id_prefix="youku_demo")
    zip_split(root / YOUKUDC_DIR, "Agriculture")
    (root / YOUKUDC_DIR / TRANSLATIONS_FILE).write_text(json.dumps(translations, ensure_ascii=False, indent=1),
                                                        encoding="utf-8")
    for folder in (".", ACTIVITYNET_DIR, VIDEOS_DIR, YOUKUDC_DIR):  # each subfolder stays marked when copied
        mark_synthetic(root / folder, DEMO_NOTE)
    (root / "README.md").write_text(
        "# Demo video sources (SYNTHETIC)\n\nWritten by `mmle demo-sources`: generated clips with made-up captions "
        "in the ActivityNet Captions and YoukuDC release formats, for trying the builders offline. Never publish "
        "a build made from them.\n\n" + "\n".join(f"    {c}" for c in demo_commands(root)) + "\n", encoding="utf-8")
    return {"activitynet": root, "youkudc": root / YOUKUDC_DIR}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", type=Path, help="where to write activitynet_captions/, videos/ and youkudc/")
    parser.add_argument("--videos", type=int, default=16, help="generated clips per source")
    parser.add_argument("--seed", type=int, default=5, help="seed of the clips and captions")


def run(args) -> int:
    written = write_demo_sources(args.directory, n_videos=args.videos, seed=args.seed)
    print(f"wrote SYNTHETIC demo sources: activitynet -> {written['activitynet']}, youkudc -> {written['youkudc']}")
    for command in demo_commands(args.directory):
        print(f"  {command}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mmlongembed.demo_sources", description=__doc__.splitlines()[0])
    add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except UserError as error:
        return report_error(error)


if __name__ == "__main__":
    raise SystemExit(main())
