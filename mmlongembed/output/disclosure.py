"""What a published build discloses about itself, rendered from its manifest: the licence of
each source, the known overlaps of its sources with public training sets and benchmarks, the
card's Hub metadata (licence, source datasets, who made the annotations and the language) and
the datasheet questions (motivation, composition, collection, preprocessing, uses, distribution,
maintenance).

The facts that no build can measure are shipped as data, keyed by source name (the builder that
reads the source, the pools table's ``dataset``): ``source_licences.json`` and ``overlaps.json``.
The dataset card (``mmlongembed.build.pipeline.write_card``) and croissant.json
(``mmlongembed.output.croissant``) read them through this module, and so does anything else that needs
them (the harness's training-overlap markers read ``overlaps.json``'s per-model entries,
``overlaps_declared_by``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
LICENCES_FILE = PACKAGE_DIR / "source_licences.json"
OVERLAPS_FILE = PACKAGE_DIR / "overlaps.json"
# Where the card's datasheet starts: a release cuts its components' cards here, and renders its own.
# The marker names the module as it was called when cards first carried it: cards already written
# and published carry this text, and a release finds its components' datasheets by it.
DATASHEET_MARKER = "<!-- datasheet: rendered from manifest.json by mmlongembed.disclosure -->"
CITATION = """@misc{mmlongembed,
  title  = {MMLongEmbed: A Benchmark for Long-Context Multimodal Embedding},
  note   = {Rebuilt with the mmlongembed toolkit},
}"""
ISSUES_URL = "https://github.com/mmlongembed/mmlongembed/issues"
HOMEPAGE = "https://github.com/mmlongembed/mmlongembed"
NO_LLM_BACKENDS = ("none", "", None)  # step records of rule fallbacks: no model wrote anything


@functools.lru_cache(maxsize=None)
def _shipped(path: Path) -> dict:
    return {k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items() if not k.startswith("_")}


def source_licences(names, kinds: dict[str, str] | None = None, unused=frozenset()) -> list[dict]:
    """The upstream parts of each source in ``names`` with their licences, one row each:
    ``source``, ``name``, ``licence``, ``spdx``, ``hub``, ``url``; given ``kinds`` (source ->
    ``hub`` or ``local``, as the manifest records how it was read), only the parts read that way;
    none of the (source, part) pairs in ``unused`` (``unused_parts``: HotpotQA's padding under
    ``--padding none``)."""
    table = _shipped(LICENCES_FILE)
    kinds = kinds or {}
    return [{"source": name, **part} for name in names for part in table.get(name, ())
            if (part.get("read") is None or kinds.get(name) in (None, part["read"]))
            and (name, part.get("part_of")) not in unused]


def unused_parts(manifest: dict) -> set[tuple[str, str]]:
    """(source, part) pairs a build recorded as not read: a part of a source's identity named
    ``none ...`` (HotpotQA's ``padding`` under ``--padding none``)."""
    return {(name, key) for name, identity in recorded_sources(manifest).items() if isinstance(identity, dict)
            for key, value in identity.items()
            if isinstance(value, dict) and str(value.get("name", "")).startswith("none")}


def recorded_sources(manifest: dict) -> dict:
    """Per source, its recorded identity (a release: each component's)."""
    return {c["name"]: c.get("sources") for c in manifest.get("components") or []} \
        or {manifest["builder"]["name"]: manifest.get("sources")}


def read_kinds(manifest: dict) -> dict[str, str]:
    """Per source, how the build read it (``hub`` or ``local``), from the recorded source identities."""
    return {name: identity["kind"] for name, identity in recorded_sources(manifest).items()
            if isinstance(identity, dict) and identity.get("kind") in ("hub", "local")}


def known_overlaps(names) -> list[dict]:
    """The known overlaps of the sources in ``names``, one row each (``source`` added)."""
    table = _shipped(OVERLAPS_FILE)
    return [{"source": name, **entry} for name in names for entry in table.get(name, ())]


def overlaps_declared_by(model: str) -> list[str]:
    """The sources whose known training overlaps name the model profile ``model`` (an entry's
    ``models``): the harness marks that model's cells of those sources as not zero-shot."""
    return [name for name, entries in _shipped(OVERLAPS_FILE).items()
            if any(e.get("kind") == "training" and model in e.get("models", ()) for e in entries)]


def source_names(manifest: dict) -> list[str]:
    """The sources of a build, by the builders that read them: a release's components, else its
    own builder."""
    components = [c["name"] for c in manifest.get("components") or [] if c.get("name")]
    return components or [manifest["builder"]["name"]]


def llm_written_steps(manifest: dict) -> list[dict]:
    """The LLM steps of a build in which a model (not a rule fallback) wrote or judged text."""
    return [s for s in manifest.get("llm_steps") or [] if s.get("backend") not in NO_LLM_BACKENDS]


def card_licence(licences: list[dict], fallback: str) -> str:
    """One Hub licence id when every part shares it, else ``other`` (the body's table says which)."""
    ids = {part["spdx"] for part in licences}
    if not licences:
        return fallback
    return ids.pop() if len(ids) == 1 and None not in ids else "other"


def hub_metadata(manifest: dict, languages, fallback_licence: str) -> dict:
    """The card's YAML fields this module answers: licence, source datasets, annotation and
    language creators, multilinguality, task ids."""
    names = source_names(manifest)
    licences = source_licences(names, read_kinds(manifest), unused_parts(manifest))
    llm = bool(llm_written_steps(manifest))
    synthetic = bool(manifest.get("synthetic"))
    annotations = {"machine-generated"}  # every qrel is set by construction, not by a person
    language = {"found"} | ({"machine-generated"} if llm or synthetic else set())
    return {
        "license": card_licence(licences, fallback_licence),
        "source_datasets": sorted({f"extended|{part['hub']}" for part in licences if part.get("hub")}) or ["original"],
        "annotations_creators": sorted(annotations),
        "language_creators": sorted(language),
        "multilinguality": ["monolingual" if len(set(languages)) <= 1 else "multilingual"],
        "task_ids": ["document-retrieval"],
    }


def preprocessing_steps(manifest: dict) -> list[str]:
    """What was done to the sources, one sentence per source (its builder's summary) and per LLM
    step (backend, model and revision, prompt name, version and hash): croissant.json's
    ``rai:dataPreprocessingProtocol`` and the datasheet's preprocessing answer."""
    from mmlongembed.core.builder import registered

    builders = registered()
    steps = []
    for name in source_names(manifest):
        cls = builders.get(name)
        if cls is not None and cls.summary:
            steps.append(f"{name} (builder version {cls.version}): {' '.join(cls.summary.split())}")
    for step in manifest.get("llm_steps") or []:
        who = ("rule fallback, no model" if step.get("backend") in NO_LLM_BACKENDS
               else f"{step.get('backend')} model {step.get('model')} revision {step.get('model_revision') or '-'}")
        where = f"{step['component']}: " if step.get("component") else ""
        steps.append(f"{where}LLM step {step.get('step')} ({who}), prompt {step.get('prompt')} version "
                     f"{step.get('prompt_version')} sha256 {step.get('prompt_hash')}")
    return steps


def datasheet_context(manifest: dict, title: str) -> dict:
    """The variables of the card's datasheet (``cards/_datasheet.md.j2``) and of croissant.json's
    responsible-AI fields, from the manifest and the shipped tables."""
    names = source_names(manifest)
    pools = manifest.get("pools") or []
    tables = manifest.get("tables") or {}
    return {
        "title": title, "sources": names, "licences": source_licences(names, read_kinds(manifest), unused_parts(manifest)), "overlaps": known_overlaps(names),
        "preprocessing": preprocessing_steps(manifest), "llm_steps": llm_written_steps(manifest),
        "synthetic": manifest.get("synthetic") or [], "absent": manifest.get("absent") or {},
        "n_pools": len(pools), "n_queries": sum(p.get("queries", 0) for p in pools),
        "n_candidates": sum(p.get("candidates", 0) for p in pools), "tables": tables,
        "builder": manifest["builder"], "toolkit": manifest["toolkit"], "seed": manifest.get("seed"),
        "components": [{"name": c["name"], "version": c["builder"]["version"]}
                       for c in manifest.get("components") or []],
        "source_kinds": _source_kinds(manifest), "issues_url": ISSUES_URL, "citation": CITATION,
        "training": bool(tables) and not pools,
    }


def _source_kinds(manifest: dict) -> dict[str, str]:
    """Per source: read from the Hub at a pinned revision, or from local files pinned by sha256."""
    out = {}
    for name, identity in recorded_sources(manifest).items():
        files = identity.get("files") if isinstance(identity, dict) else None
        kind = identity.get("kind") if isinstance(identity, dict) else None
        out[name] = (f"{len(files)} local files, each pinned by its sha256" if files
                     else "the Hugging Face Hub at a pinned revision" if kind == "hub"
                     else "local files (see manifest.json `sources`)")
    return out


def render_datasheet(manifest: dict, title: str) -> str:
    """The card's closing sections: licences, known overlaps, the datasheet questions."""
    from mmlongembed.output.card import render_template

    return render_template("_datasheet.md.j2", datasheet_context(manifest, title))
