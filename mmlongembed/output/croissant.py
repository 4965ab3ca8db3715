"""croissant.json: the build described in Croissant 1.0 with its responsible-AI fields, rendered
from the manifest and the data files as written (never by hand), beside the card.

Every data file the manifest records is a ``FileObject`` (its path in the repo and its sha256);
each is read by one ``RecordSet`` whose fields are the file's columns, typed from its parquet
schema. A pool's configs select rows of a shared file by its ``pool`` column (docs/LAYOUT.md), so
the RecordSet of a shard holds the rows of every pool of that shard, ``pool`` included: filtered
on it, they are the rows ``load_dataset(repo, "<pool>-<part>")`` returns, in the same order.

The file is metadata, like the card: it is not in the manifest's ``files`` and not a data file
that ``mmle reproduce`` compares. It holds nothing that changes between two builds of the same
config, seed and sources (no date, no path outside the build).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from mmlongembed.output.disclosure import HOMEPAGE, datasheet_context, source_names

CROISSANT_FILE = "croissant.json"
CONFORMS_TO = "http://mlcommons.org/croissant/1.0"
# The standard @context of Croissant 1.0 (mlcroissant warns on any other), responsible-AI prefix included.
CONTEXT = {
    "@language": "en", "@vocab": "https://schema.org/", "citeAs": "cr:citeAs", "column": "cr:column",
    "conformsTo": "dct:conformsTo", "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"}, "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/", "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"}, "extract": "cr:extract", "field": "cr:field",
    "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject", "fileSet": "cr:fileSet", "format": "cr:format",
    "includes": "cr:includes", "isLiveDataset": "cr:isLiveDataset", "jsonPath": "cr:jsonPath", "key": "cr:key",
    "md5": "cr:md5", "parentField": "cr:parentField", "path": "cr:path", "recordSet": "cr:recordSet",
    "references": "cr:references", "regex": "cr:regex", "repeated": "cr:repeated", "replace": "cr:replace",
    "samplingRate": "cr:samplingRate", "sc": "https://schema.org/", "separator": "cr:separator",
    "source": "cr:source", "subField": "cr:subField", "transform": "cr:transform",
}
PARQUET = "application/x-parquet"
SCALAR_TYPES = {"string": "sc:Text", "large_string": "sc:Text", "int64": "sc:Integer", "int32": "sc:Integer",
                "double": "sc:Float", "float": "sc:Float", "bool": "sc:Boolean", "binary": "sc:Text"}
IMAGE_STRUCT = "struct<bytes: binary, path: string>"  # how `datasets` stores an Image
CONTENT_HASH = re.compile(r"-[0-9a-f]{12}\.parquet$")
SPDX_URL = "https://spdx.org/licenses/{}.html"
SPDX_SPELLING = {"apache-2.0": "Apache-2.0"}  # the Hub's lower-case ids that SPDX spells otherwise than upper case


def record_set_id(path: str) -> str:
    """A data file's RecordSet id: its path without ``data/`` and the content hash
    (``data/govreport/corpus/16k-1a2b3c4d5e6f.parquet`` -> ``govreport/corpus/16k``)."""
    return CONTENT_HASH.sub("", path.removeprefix("data/")).removesuffix(".parquet")


def _field(record_set: str, file_id: str, column) -> dict:
    """One column as a typed Field read from ``file_id``: a list of images is a repeated
    ImageObject (each one's bytes), a list of scalars a repeated field of their type, a struct a
    field with one subField per part."""
    kind = str(column.type)
    source = {"fileObject": {"@id": file_id}, "extract": {"column": column.name}}
    out = {"@type": "cr:Field", "@id": f"{record_set}/{column.name}", "name": column.name}
    if kind.startswith("list<") and IMAGE_STRUCT in kind:
        return {**out, "dataType": "sc:ImageObject", "repeated": True,
                "source": {**source, "transform": {"jsonPath": "bytes"}}}
    if kind.startswith("list<"):
        inner = str(column.type.value_type)
        return {**out, "dataType": SCALAR_TYPES.get(inner, "sc:Text"), "repeated": True, "source": source}
    if kind.startswith("struct<"):  # a record of named parts: one subField each
        return {**out, "dataType": "sc:Text", "subField": [
            {"@type": "cr:Field", "@id": f"{record_set}/{column.name}/{child.name}", "name": child.name,
             "dataType": SCALAR_TYPES.get(str(child.type), "sc:Text"),
             "source": {**source, "transform": {"jsonPath": child.name}}} for child in column.type]}
    return {**out, "dataType": SCALAR_TYPES.get(kind, "sc:Text"), "source": source}


def _configs_of(path: str, configs) -> list[str]:
    return sorted(spec.name for spec in configs if spec.path == path)


def record_sets(root: Path, files: dict[str, dict], configs) -> tuple[list[dict], list[dict]]:
    """(the FileObjects, the RecordSets) of every parquet data file the manifest records."""
    import pyarrow.parquet as pq

    distribution, sets = [], []
    for path, facts in sorted(files.items()):
        distribution.append({"@type": "cr:FileObject", "@id": path, "name": path, "contentUrl": path,
                             "encodingFormat": PARQUET, "sha256": facts["sha256"]})
        schema = pq.read_schema(root / path)
        set_id = record_set_id(path)
        names = _configs_of(path, configs)
        selects = ("the rows of configs " + ", ".join(names) + " (selected by `pool`)") if len(names) > 1 \
            else f"config {names[0]}" if names else "a data file"
        sets.append({"@type": "cr:RecordSet", "@id": set_id, "name": set_id,
                     "description": f"{path}: {selects}",
                     "field": [_field(set_id, path, column) for column in schema]})
    return distribution, sets


def _licence_entries(licences: list[dict]) -> list:
    """Each part's licence: its SPDX page where it has one, else a CreativeWork naming it."""
    out = []
    for part in licences:
        spdx = part.get("spdx")
        if spdx:
            entry = SPDX_URL.format(SPDX_SPELLING.get(spdx, spdx.upper()))
        else:
            entry = {"@type": "sc:CreativeWork", "name": f"{part['name']}: {part['licence']}", "url": part["url"]}
        if entry not in out:
            out.append(entry)
    return out


def _rai_fields(sheet: dict) -> dict:
    """The responsible-AI fields, from the datasheet's answers (``disclosure.datasheet_context``)."""
    kinds = "; ".join(f"{name}: {kind}" for name, kind in sheet["source_kinds"].items())
    overlaps = [f"{o['source']} appears in {o['appears_in']} ({o['kind']}: {o['what']}; stated in {o['stated_in']})"
                for o in sheet["overlaps"]]
    models = [f"LLM step {s.get('step')}: {s.get('backend')} model {s.get('model')} revision "
              f"{s.get('model_revision') or '-'}, prompt {s.get('prompt')} sha256 {s.get('prompt_hash')}"
              for s in sheet["llm_steps"]]
    synthetic_parts = list(sheet["synthetic"]) + [f"text written by the {m}" for m in models]
    if "needle" in sheet["sources"]:
        synthetic_parts.append("needle: the needle grid inserts generated needles (text and drawn images) into "
                               "real haystacks at controlled depths")
    synthetic = (" Synthetic parts: " + "; ".join(synthetic_parts) + ".") if synthetic_parts else \
        " Nothing in it is synthetic."
    return {
        "rai:dataCollection": "Nothing was collected from people: the benchmark is built from public datasets, "
                              f"each pinned in manifest.json ({kinds}).{synthetic}",
        "rai:dataCollectionType": ["Secondary Data Analysis"],
        "rai:dataPreprocessingProtocol": sheet["preprocessing"],
        "rai:dataAnnotationProtocol": ["Every relevance label (qrel) is set by construction: a query's positive "
                                       "is the candidate built from its own source record; the rest are easy "
                                       "negatives (other records) and hard negatives (the positive edited)."],
        "rai:hasSyntheticData": bool(synthetic_parts),
        "rai:machineAnnotationTools": models or ["none: no LLM wrote or judged text in this build"],
        "rai:dataUseCases": ["Evaluating embedding models on long-context multimodal retrieval, one pool at a "
                             "time (Precision@1). Not for training: do not train or tune on the test pools or "
                             "the -audit configs, which name the positives."],
        "rai:dataLimitations": [
            "Small pools give wide confidence intervals; report them (mmle score does).",
            "Lengths are counted with one tokenizer (Qwen3) and ceil(H/32)*ceil(W/32) tokens per image; other "
            "models see other lengths.",
            *(f"Absent source {name}: {why}" for name, why in sheet["absent"].items()),
            *overlaps],
        "rai:dataBiases": [
            "The sources are English (translated where they were not) and skewed to Wikipedia, US government "
            "reports, web and corporate documents; other languages and domains are not measured.",
            "Hard negatives are edits of the positive, so the benchmark rewards reading over topical matching by "
            "design; a model trained on a source's text may still be favoured (see the known overlaps)."],
        "rai:personalSensitiveInformation": [
            "No personal data was collected. The sources are public and may name public figures or contain "
            "what their own releases contain (news, reports, web pages, videos of people); nothing was added."],
        "rai:dataReleaseMaintenancePlan": "Versioned by name: a change that alters the data bumps the builder's "
                                          "version and is released under a new immutable tag; `mmle reproduce "
                                          f"<repo>@<tag>` rebuilds a release and compares it. Problems: {sheet['issues_url']}.",
    }


def commit_date(commit: str) -> str | None:
    """The date of the toolkit commit that made a build (``YYYY-MM-DD``): croissant.json's
    publication date, the same for every build of that commit; None outside a git checkout."""
    from mmlongembed.output.manifest import REPO_ROOT

    try:
        out = subprocess.run(["git", "show", "-s", "--format=%cs", commit], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out if re.fullmatch(r"\d{4}-\d{2}-\d{2}", out) else None


def render_croissant(root: Path, manifest: dict, title: str, description: str, languages, configs) -> dict:
    """The Croissant document of the build in ``root`` (its data files as ``manifest`` records them)."""
    sheet = datasheet_context(manifest, title)
    distribution, sets = record_sets(Path(root), manifest.get("files") or {}, configs)
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "name": manifest["builder"]["name"],
        "alternateName": title,
        "description": description,
        "conformsTo": CONFORMS_TO,
        "citeAs": sheet["citation"],
        "license": _licence_entries(sheet["licences"]),
        "url": HOMEPAGE,
        "version": manifest["builder"]["version"],
        **({"datePublished": date} if (date := commit_date(manifest["toolkit"].get("git_commit", ""))) else {}),
        "inLanguage": list(languages),
        "keywords": ["long-context", "embedding", "retrieval", "multimodal", "mmlongembed", *source_names(manifest)],
        "isAccessibleForFree": True,
        "creator": {"@type": "sc:Organization", "name": "mmlongembed", "url": HOMEPAGE},
        **_rai_fields(sheet),
        "distribution": distribution,
        "recordSet": sets,
    }


def write_croissant(root: Path, manifest: dict, title: str, description: str, languages, configs) -> Path:
    path = Path(root) / CROISSANT_FILE
    document = render_croissant(root, manifest, title, description, languages, configs)
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
