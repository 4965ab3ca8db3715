"""ActivityNet Captions Temporal Summarization (paper §3.2.4, appendix A.4).

The query rewrites a run of consecutive caption events of one video into one paragraph whose
order is carried by transition words; the positive is the run's 1-FPS frames in time order.
The easy pool adds three runs of other videos cut to the positive's length; the hard pool adds the
positive's own frames with its event blocks reversed, its front half shuffled or its back half
shuffled, so only the order of events tells them apart. Easy and hard pools of a length share
their queries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from builders._temporal import TemporalBuilder, TemporalConfig
from mmlongembed.core.builder import BuildReport, register
from mmlongembed.readers.dense_captions import VideoRecord, activitynet_files, read_activitynet_files


@dataclass
class ActivityNetConfig(TemporalConfig):
    # paper Table 1: 420 queries over 6 pools
    max_queries_per_pool: int = field(default=70, metadata={"help": "cap on queries per pool (paper: 70)"})


@register
class ActivityNetBuilder(TemporalBuilder):
    """Temporal Summarization from ActivityNet Captions: find the video that shows a described
    sequence of events in order, against the same frames reversed or half-shuffled."""

    name = "activitynet"
    # 1.1: easy negatives from videos whose frames are the positive's size first (no length seam at
    # mixed resolutions)
    version = "1.1.0"
    title = "MMLongEmbed Temporal Summarization: ActivityNet Captions"
    # its rows in the README's builder tables (`make readme` writes them): what it makes, from what
    summary = (
        "Temporal Summarization: a rewritten sequence of caption events -> the run's 1-FPS frames in order; hard "
        "negatives are the same frames with the event blocks reversed, front-half or back-half shuffled; easy "
        "negatives are other videos' runs cut to the positive's length"
    )
    source_formats = (
        "ActivityNet Captions JSON + a folder of videos named by id (`pip install .[video]`; see "
        "[docs/VIDEO.md](docs/VIDEO.md))"
    )
    config_class = ActivityNetConfig
    licence = "other"
    source_name = "ActivityNet Captions"
    source_licence = "annotations: research use, no licence stated (Krishna et al., ICCV 2017); videos: YouTube"
    source_citation = "ActivityNet Captions (Krishna et al., ICCV 2017)"

    def annotation_files(self, root: Path) -> list[Path]:
        return activitynet_files(root)

    def read_records(self, root: Path, config: ActivityNetConfig,
                     report: BuildReport) -> tuple[list[VideoRecord], str]:
        """Every ActivityNet Captions JSON under ``root`` (``train.json``, ``val_1.json``,
        ``val_2.json``, or any file of that shape); the videos anywhere under ``root``, named by
        id with or without the ``v_`` prefix."""
        layout = "ActivityNet Captions JSON + video files named by id"
        return read_activitynet_files(self.annotation_files(root), report), layout

    def example_config(self, directory) -> ActivityNetConfig:
        from builders._temporal_fixtures import TEMPORAL_FIXTURE_LENGTHS, write_temporal_sources

        directory = Path(directory)
        write_temporal_sources(directory, n_videos=16)
        return ActivityNetConfig(sources=str(directory), lengths=TEMPORAL_FIXTURE_LENGTHS, max_queries_per_pool=3,
                                 frame_store=str(directory / "frame-store"))
