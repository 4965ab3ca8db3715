"""HotpotQA (Yang et al., EMNLP 2018), distractor setting: records in the original release
format (a JSON list, or JSON Lines) or in the Hub's column layout, read into ``Instance``s.

A record is kept with 2 to 5 supporting facts, each naming a non-empty sentence of one of its
paragraphs; anything else is counted under its skip reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from mmlongembed.core.builder import BuildReport
from mmlongembed.core.errors import UserError
from mmlongembed.readers.sources import iter_jsonl, read_json

MIN_EVIDENCE, MAX_EVIDENCE = 2, 5


@dataclass(frozen=True)
class Instance:
    id: str
    question: str
    answer: str
    kind: str  # bridge / comparison
    level: str
    context: tuple[tuple[str, tuple[str, ...]], ...]
    supporting: tuple[tuple[str, int], ...]  # (title, sentence index), in document order
    origin: str

    def evidence_texts(self) -> list[str]:
        """Its supporting-fact sentences, stripped, in document order."""
        sentences = dict(self.context)
        return [sentences[t][i].strip() for t, i in self.supporting]


def parse_instance(record: dict, origin: str) -> tuple[Instance | None, str]:
    """An Instance from the original HotpotQA format or the Hub's column layout, else a skip reason."""
    try:
        rid = str(record.get("_id", record.get("id", "")))
        question, answer = record["question"], record["answer"]
        context, facts = record["context"], record["supporting_facts"]
        if isinstance(context, dict):  # Hub layout: {"title": [...], "sentences": [[...]]}
            context = list(zip(context["title"], context["sentences"]))
        if isinstance(facts, dict):
            facts = list(zip(facts["title"], facts["sent_id"]))
        context = tuple((str(t), tuple(str(s) for s in sentences)) for t, sentences in context)
        facts = [(str(t), int(i)) for t, i in facts]
    except (KeyError, TypeError, ValueError):
        return None, "malformed_record"
    if not rid or not isinstance(question, str) or not question.strip() or not isinstance(answer, str):
        return None, "malformed_record"
    facts = sorted(set(facts), key=lambda f: (next((k for k, (t, _) in enumerate(context) if t == f[0]), -1), f[1]))
    if not MIN_EVIDENCE <= len(facts) <= MAX_EVIDENCE:
        return None, "evidence_count_outside_2_to_5"
    sentences = dict(context)
    if len(sentences) != len(context):
        return None, "duplicate_paragraph_title"
    for title, index in facts:
        if title not in sentences or not 0 <= index < len(sentences[title]):
            return None, "supporting_fact_missing"
        if not sentences[title][index].strip():
            return None, "empty_evidence"
    return Instance(rid, question.strip(), answer.strip(), str(record.get("type", "")), str(record.get("level", "")),
                    context, tuple(facts), origin), ""


def origin_file(origin: str) -> str:
    """The file a record came from (its origin is ``<file>:<record number>``, or ``hub``)."""
    return origin.rsplit(":", 1)[0]


def file_split(name: str) -> str:
    """The HotpotQA split a local file holds, by its name: train, dev, or unknown (the records
    themselves do not say)."""
    lowered = name.lower()
    if "train" in lowered:
        return "train"
    if "dev" in lowered or "validation" in lowered:
        return "dev"
    return "unknown"


def local_files(root: Path, split: str = "all") -> list[Path]:
    """The *.jsonl and *.json files under ``root`` of ``split`` (all: every file)."""
    files = sorted(root.rglob("*.jsonl")) + sorted(root.rglob("*.json"))
    return [path for path in files if split == "all" or file_split(path.name) == split]


def read_local_instances(root: Path, report: BuildReport, split: str = "all") -> Iterator[tuple[dict, str]]:
    """Records of *.jsonl files and *.json files (a JSON list: the official release format) of
    ``split`` (``local_files``)."""
    files = local_files(root, split)
    if not files:
        raise UserError(f"no HotpotQA file of split {split!r} under {root} (a file's split is told by its name: "
                        "'train', or 'dev' / 'validation'); pass --split all to read every file")
    for path in (p for p in files if p.suffix == ".jsonl"):
        for number, record in enumerate(iter_jsonl(path, report), 1):
            yield record, f"{path.name}:{number}"
    for path in (p for p in files if p.suffix == ".json"):
        records = read_json(path, report)
        if not isinstance(records, list):
            report.skip("not_a_hotpotqa_file", path.name)
            continue
        for number, record in enumerate(records, 1):
            if isinstance(record, dict):
                yield record, f"{path.name}:{number}"
            else:
                report.skip("malformed_record", f"{path.name}:{number}")


def read_instances(records: Iterable[tuple[dict, str]], report: BuildReport) -> tuple[list[Instance], list[dict]]:
    """The usable instances of ``records`` ((record, origin) pairs), sorted by id (a record that
    cannot be parsed, or repeats an id, is counted under its reason), and per file read: its
    split, how many records it held and how many of them are usable."""
    instances, seen = [], set()
    read: Counter = Counter()  # records per file
    for record, origin in records:
        read[origin_file(origin)] += 1
        instance, reason = parse_instance(record, origin)
        if instance is None:
            report.skip(reason, origin)
        elif instance.id in seen:
            report.skip("duplicate_id", origin)
        else:
            seen.add(instance.id)
            instances.append(instance)
    usable = Counter(origin_file(i.origin) for i in instances)
    files = [{"file": name, "split": "dev" if name == "hub" else file_split(name), "records": n, "usable": usable[name]}
             for name, n in read.items()]
    return sorted(instances, key=lambda i: i.id), files
