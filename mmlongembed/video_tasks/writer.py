"""Writing task repos: parquet per config and split, the card's ``configs:`` header, ``tasks.json``
(the generated ``TaskMetadata``), the ``mteb_tasks.py`` loader and ``manifest.json``.

A task repo is a Hugging Face dataset repo that mteb reads with ``load_dataset`` through the
task classes of ``mteb_tasks.py``. Files are named by content hash (``output.writer.write_parquet``),
and the repo's content revision (``tasks.json`` ``revision``, what the generated metadata pins
until it is published under a tag) is a hash of every data file's hash.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Callable, Sequence

import yaml

from mmlongembed.output.card import size_category
from mmlongembed.output.manifest import file_sha256
from mmlongembed.output.outdir import remove_stale_temporaries
from mmlongembed.output.writer import (
    arrow_row_groups, commit_output_dir, consecutive_row_groups, write_json, write_parquet)
from mmlongembed.build.pipeline import output_site, temporary_output
from mmlongembed.video_tasks.tasks import TaskOutput

LOADER = Path(__file__).with_name("mteb_tasks.py")


def write_task_data(root: Path, tasks: Sequence[TaskOutput], progress=None) -> tuple[list[dict], dict[str, dict]]:
    """Every config of every task as parquet under ``root/data/<config>/``: the card's config
    entries and {repo path: {sha256, bytes}}."""
    entries, files = [], {}
    items = [(task, config, splits) for task in tasks for config, splits in task.configs.items()]
    for task, config, splits in (progress(items) if progress else items):
        data_files = []
        for split, rows in splits.items():
            features = task.features[config]
            path = write_parquet(arrow_row_groups(consecutive_row_groups(rows), features), features,
                                 root / "data" / config, split)
            relative = path.relative_to(root).as_posix()
            files[relative] = {"sha256": file_sha256(path), "bytes": path.stat().st_size}
            data_files.append({"split": split, "path": relative})
        entries.append({"config_name": config, "data_files": data_files})
    return entries, files


def content_revision(files: dict[str, dict]) -> str:
    material = json.dumps({k: v["sha256"] for k, v in sorted(files.items())}, sort_keys=True)
    return hashlib.sha1(material.encode()).hexdigest()  # 40 hex digits, like a git commit


def write_task_specs(root: Path, tasks: Sequence[TaskOutput], revision: str, extra: dict) -> None:
    write_json(root / "tasks.json", {"revision": revision, **extra, "tasks": [t.spec() for t in tasks]})
    shutil.copyfile(LOADER, root / "mteb_tasks.py")


def card_header(*, title: str, licence: str, configs: list[dict], n_rows: int, tags: Sequence[str]) -> str:
    header = {"license": "unknown" if licence == "not specified" else licence, "pretty_name": title,
              "task_categories": ["video-classification", "feature-extraction"],
              "tags": ["video", "audio", "embedding", "mteb", "mmlongembed", *tags],
              "size_categories": [size_category(n_rows)], "configs": configs}
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n"


def render_body(template: str, context: dict) -> str:
    import jinja2

    from mmlongembed.output.card import CARDS_DIR

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(CARDS_DIR)), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    return env.get_template(template).render(**context)


def write_repo(root: Path, tasks: Sequence[TaskOutput], *, title: str, licence: str, template: str, context: dict,
               manifest: dict, tags: Sequence[str] = (), progress=None) -> str:
    """Data, tasks.json, mteb_tasks.py, README.md and manifest.json; returns the content revision."""
    configs, files = write_task_data(root, tasks, progress)
    revision = content_revision(files)
    write_task_specs(root, tasks, revision, {"title": title})
    n_rows = sum(len(rows) for t in tasks for splits in t.configs.values() for rows in splits.values())
    body = render_body(template, {**context, "revision": revision, "tasks": tasks, "title": title})
    (root / "README.md").write_text(card_header(title=title, licence=licence, configs=configs, n_rows=n_rows,
                                                tags=tags) + body, encoding="utf-8")
    write_json(root / "manifest.json", {**manifest, "revision": revision, "files": files,
                                        "tasks": {t.name: {"family": t.family, "variant": t.variant, **t.stats}
                                                  for t in tasks}})
    return revision


def write_task_folder(final_dir: Path, overwrite: bool, write: Callable[[Path], object]) -> None:
    """``write(tmp_dir)`` into a temporary sibling of ``final_dir``, moved into place when it
    returns: the part every build shares (``mmlongembed.build.pipeline``: the build lock, the
    temporaries of a killed run removed, nothing left behind on a failure, a full disk one
    line)."""
    final_dir = Path(final_dir)
    with output_site(final_dir.parent, final_dir.name) as site:
        remove_stale_temporaries(site)
        with temporary_output(site, overwrite) as tmp_dir:
            write(tmp_dir)
            commit_output_dir(tmp_dir, site)
