"""YoukuDenseCaption Temporal Summarization (paper §3.2.4, appendix A.4).

As ActivityNet Captions, from Chinese dense captions: each caption of a run is first translated
literally into English (an LLM step with greedy decoding and no offline fallback), then the run's
translated captions are rewritten into one paragraph with transition words. The positive is the
run's 1-FPS frames in time order; hard negatives are the same frames with the event blocks
reversed or half-shuffled; easy negatives are runs of other videos of the same band.

Source layouts read (``--sources DIR``):

1. **The YoukuDC release** (ModelScope ``os_ai/Youku_Dense_Caption``): ``meta_files/<Category>.csv``
   with ``data_files/<Category>/{train,val,test}`` holding the videos; ``train`` and ``val`` ship
   zipped (``data_files/<Category>/train.zip``, ``val.zip``) and are read without unzipping them
   by hand: a video a row names is extracted once into ``--video-cache``. The release's column
   names are not published outside the download, so the reader takes, per CSV file: the video
   from the column ``--video-column`` names, else the first of ``video_path``, ``video``, ``path``,
   ``video_file``, ``file``, ``video_name`` (absolute, or relative to the root, to ``data_files/``, to
   ``data_files/<Category>/``, or found by file name anywhere under ``data_files/<Category>/`` or
   in its zip archives); a file with neither stops the build with one line naming its columns. The
   id from ``video_id`` / ``vid`` / ``id`` (else the file stem); the duration from ``duration``
   (optional: else the decoded video's); and the captions either from one JSON column
   (``--caption-column``, else the first of ``captions``, ``caption``, ``annotations``,
   ``dense_captions``, ``events``: a list of objects with
   ``timestamp`` / ``timestamps`` / ``time`` = [start, end] or ``start`` + ``end``, and ``caption`` /
   ``sentence`` / ``text`` / ``description``) or from two JSON columns ``timestamps`` and
   ``sentences`` (ActivityNet's shape). Rows it cannot read are counted skips
   (``malformed_annotation``). The columns actually used are recorded in the manifest notes.
   (The reader: ``mmlongembed.readers.youku``.)
2. **A plain local layout**: ActivityNet Captions JSON files (``{video_id: {duration, timestamps,
   sentences}}``) with Chinese sentences, and video files anywhere under the root named by id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from builders._temporal import TemporalBuilder, TemporalConfig
from mmlongembed.core.builder import BuildReport, register
from mmlongembed.readers.dense_captions import VideoRecord, activitynet_files, read_activitynet_files
from mmlongembed.readers.youku import CAPTION_COLUMNS, PATH_COLUMNS, read_youku_release


@dataclass
class YoukuDCConfig(TemporalConfig):
    # paper Table 1: 600 queries over 6 pools
    max_queries_per_pool: int = field(default=100, metadata={"help": "cap on queries per pool (paper: 100)"})
    caption_column: str = field(default="", metadata={
        "help": "release layout: the meta_files CSV column holding a video's captions (JSON list of events); "
                "default: the first of " + ", ".join(CAPTION_COLUMNS) + ", or timestamps + sentences"})
    video_column: str = field(default="", metadata={
        "help": "release layout: the meta_files CSV column holding the video file; default: the first of "
                + ", ".join(PATH_COLUMNS)})
    video_cache: str = field(default=".cache/mmle/youkudc-videos", metadata={
        "help": "release layout: where videos named by the CSV are extracted from the zipped train/val folders "
                "(once; the frame store keys them by content)"})


@register
class YoukuDCBuilder(TemporalBuilder):
    """Temporal Summarization from YoukuDenseCaption: Chinese dense captions translated to English,
    then the same task as ActivityNet Captions (a described sequence of events against the same
    frames reversed or half-shuffled)."""

    name = "youkudc"
    # 1.1.0: zipped train/val folders, --caption-column / --video-column; 1.2.0: easy negatives from
    # videos whose frames are the positive's size first (no length seam at mixed resolutions)
    version = "1.2.0"
    title = "MMLongEmbed Temporal Summarization: YoukuDenseCaption"
    # its rows in the README's builder tables (`make readme` writes them): what it makes, from what
    summary = (
        "Temporal Summarization from Chinese dense captions, translated literally by the LLM layer before the "
        "rewrite"
    )
    source_formats = (
        "the YoukuDC release (`meta_files/*.csv` + `data_files/`, zipped `train`/`val` read as shipped; "
        "`--video-column`/`--caption-column` name the CSV columns) or ActivityNet-shaped JSON with Chinese "
        "captions, + videos"
    )
    config_class = YoukuDCConfig
    licence = "cc-by-nc-sa-4.0"
    languages = ("en",)
    translate_captions = True
    source_name = "YoukuDenseCaption"
    source_licence = "CC BY-NC-SA 4.0"
    source_citation = "Youku Dense Caption (Xiong et al., ICLR 2025)"

    def annotation_files(self, root: Path) -> list[Path]:
        if (root / "meta_files").is_dir():
            return sorted((root / "meta_files").glob("*.csv"))
        return activitynet_files(root)

    def read_records(self, root: Path, config: YoukuDCConfig,
                     report: BuildReport) -> tuple[list[VideoRecord], str]:
        if (root / "meta_files").is_dir():
            self._zip_members: dict[str, str] = {}
            records, used = read_youku_release(root, report, config.caption_column, config.video_column,
                                               Path(config.video_cache), self._zip_members)
            report.notes.append(f"YoukuDC release layout: columns used {json.dumps(used, sort_keys=True)}")
            return records, "YoukuDC release (meta_files/*.csv + data_files/)"
        layout = "plain local layout (ActivityNet-shaped JSON + video files named by id)"
        return read_activitynet_files(self.annotation_files(root), report), layout

    def video_naming(self, records: list[VideoRecord]) -> str:
        """The release layout finds a video where its meta CSV's video column says; the plain layout
        by id, as ActivityNet's."""
        if getattr(self, "_zip_members", None) is None:
            return super().video_naming(records)
        return ("the meta_files/*.csv name each video in their video column (--video-column): put the files at "
                "those paths under the folder or under data_files/<category>/, or keep the release's zipped "
                "train/val folders there")

    def video_label(self, path: Path, root: Path) -> str:
        """A video extracted from the release's zips is named by its archive member, not by where
        the cache put it."""
        return getattr(self, "_zip_members", {}).get(str(path)) or super().video_label(path, root)

    def example_config(self, directory) -> YoukuDCConfig:
        """Generated Chinese captions in the release layout; translation has no offline
        fallback, so the example talks to a loopback fake LLM server that it starts."""
        from builders._temporal_fixtures import TEMPORAL_FIXTURE_LENGTHS, write_temporal_sources
        from mmlongembed.llm.fake_captions import start_caption_server

        directory = Path(directory)
        translations = write_temporal_sources(directory, n_videos=16, language="zh", layout="youku")
        server = start_caption_server(translations)
        return YoukuDCConfig(sources=str(directory), lengths=TEMPORAL_FIXTURE_LENGTHS, max_queries_per_pool=3,
                             frame_store=str(directory / "frame-store"), llm="openai", llm_base_url=server.url,
                             llm_model="fake-model", llm_cache=str(directory / "llm-cache"), llm_backoff=0.01)
