"""Render the dataset card (README.md) from the templates in cards/ and the built data."""

from __future__ import annotations

from pathlib import Path

import yaml

CARDS_DIR = Path(__file__).resolve().parents[2] / "cards"


def size_category(n_rows: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n_rows < limit:
            return label
    return "1M<n<10M"


RETRIEVAL_TASK_CATEGORIES = ("text-retrieval", "visual-document-retrieval")
WITH_IMAGES = ("image", "mixed")  # pool and query modalities that carry pictures


def retrieval_categories(modalities) -> tuple[str, ...]:
    """The card's task categories from what the build's pools hold: text retrieval, and visual
    document retrieval only where a pool or its queries carry images."""
    return tuple(c for c, wanted in (("text-retrieval", True),
                                     ("visual-document-retrieval", any(m in WITH_IMAGES for m in modalities)))
                 if wanted)


def yaml_header(*, licence: str, languages, pretty_name: str, configs: list, n_rows: int,
                task_categories=RETRIEVAL_TASK_CATEGORIES, multimodal: bool = True,
                disclosed: dict | None = None) -> str:
    """The card's YAML header; ``disclosed``: the fields ``disclosure.hub_metadata`` answers from
    the manifest (licence, source datasets, annotation and language creators, ...)."""
    disclosed = dict(disclosed or {})
    if "text-retrieval" not in task_categories:  # the Hub's retrieval task ids belong to that category
        disclosed.pop("task_ids", None)
    header = {
        "license": disclosed.pop("license", licence),
        "language": list(languages),
        "pretty_name": pretty_name,
        **{key: disclosed.pop(key) for key in ("source_datasets", "annotations_creators", "language_creators",
                                               "multilinguality") if key in disclosed},
        "task_categories": list(task_categories),
        **disclosed,
        "tags": ["long-context", "embedding", "retrieval", *(["multimodal"] if multimodal else []), "mmlongembed"],
        "size_categories": [size_category(n_rows)],
        "configs": [spec.card_entry() for spec in configs],
    }
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n"


def render_template(template_name: str, context: dict) -> str:
    """One template of cards/ rendered with ``context`` (an unknown variable is an error)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(CARDS_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template(template_name).render(**context)


def render_card(template_name: str, context: dict, appendix: str = "", disclosed: dict | None = None) -> str:
    """The card: YAML header (``disclosed``: the fields rendered from the manifest,
    ``disclosure.hub_metadata``), the builder's template, then ``appendix`` (the licences, known
    overlaps and datasheet, ``disclosure.render_datasheet``)."""
    body = render_template(template_name, context)
    if appendix:
        body = body.rstrip("\n") + "\n\n" + appendix
    modalities = context.get("modalities")  # a pool build's pool and query modalities
    default = retrieval_categories(modalities) if modalities is not None else RETRIEVAL_TASK_CATEGORIES
    return yaml_header(
        licence=context["licence"], languages=context["languages"], pretty_name=context["title"],
        configs=context["configs"], n_rows=context["n_rows"],
        task_categories=context.get("task_categories", default),
        multimodal=modalities is None or any(m != "text" for m in modalities), disclosed=disclosed,
    ) + body
