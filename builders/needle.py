"""Visual Grounding (paper §3.2.1, appendix A.1, Table 4, Figure 3): multimodal needles in
interleaved haystacks, over a full needle-depth by length grid.

Every (needle modality, background, length, depth) cell is its own pool: N candidate documents
(default 25), each a haystack holding exactly one needle, and one query per needle, which must
find the one document that holds its needle. The N needles form one confusable family: text
needles share a NeedleBench template and differ in one core entity, image needles are drawn from
one procedural spec and differ in one attribute. As in the paper, one fixed set of N query-needle
pairs per needle modality serves every cell of the grid, so that the cells differ only in depth,
length and background (``--needle-sets per_family`` builds one grid per family instead).

Beside the paper's grid, the lexically matched tier (``--lexical-tier``, not in the paper; issue
37): a second grid of text-needle cells, ``needle-text-lexical-<background>-<length>-d<depth>``
(difficulty ``LEXICAL``), whose queries share no content word with their needle; by default each
(length, depth) once, the backgrounds in turn (``--lexical-grid``). In the paper's
text cells the query names its needle's subject verbatim, so BM25 finds it (P@1 100). The tier's
needles are a ``number`` family ("Crawford-417 Island"), each query names the number in words
("number four hundred seventeen") and rewords the rest of the question: the LLM step
``query_paraphrase`` (``run_steps``; a deterministic wording under ``--llm none``), checked to
avoid every word of the needle and to name the needle's number (``mmlongembed.needles.paraphrase``,
which gives the reasoning). Its own needle set, drawn with its own generator label, and its own
cells: every cell of the paper's grid reads back the same rows with or without it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from builders._needle_checks import card_statistics, check_needle_pool, confusability
from mmlongembed.core.builder import Builder, BuildReport, CommonConfig, Problem, register
from mmlongembed.build.capacity import LengthLimit, planned_memory
from mmlongembed.core.documents import IMAGE, IMAGE_PLACEHOLDER, Segment, image_segment
from mmlongembed.core.errors import UserError
from mmlongembed.output.manifest import files_identity
from mmlongembed.needles import images as synth
from mmlongembed.llm import LLMConfig
from mmlongembed.llm.steps import paraphrase_queries
from mmlongembed.needles import paraphrase
from mmlongembed.needles.sets import LEXICAL_LABEL, Needle, draw_lexical_needle_set, draw_needle_set, encode_needle
from mmlongembed.needles.text import SUBJECT_KINDS, NeedleTemplate, parse_templates
from mmlongembed.ops.haystacks import Haystacks, image_share
from mmlongembed.ops.length import exact_tokens
from mmlongembed.ops.needle import (
    Stream, cell_name, insert_needle, locate_needle, nearest_boundary, needle_side, pool_modality, sigmoid_depths)
from mmlongembed.build.pool_plan import PoolContext
from mmlongembed.core.pools import LEXICAL, POSITIVE, Candidate, LengthBand, Pool, Query
from mmlongembed.readers.needle import (
    NEEDLEBENCH, NEEDLEBENCH_FILES, OBELICS, Sources, card_sources, local_source_paths, read_hub_sources,
    read_local_sources)
from mmlongembed.checks.summary import shortcut_check
from mmlongembed.readers.sources import require_dir
from mmlongembed.core.tokens import default_counter, image_tokens

TEXT_INSTRUCTION = "Given this question, retrieve the document that contains the fact that answers it."
IMAGE_TEXT_INSTRUCTION = "Given this description of a picture, retrieve the document that contains the picture."
IMAGE_IMAGE_INSTRUCTION = "Given this picture, retrieve the document that contains the same picture."
BACKGROUNDS = ("text", "mixed", "image")
NEEDLE_MODALITIES = ("text", "image")
QUERY_IMAGE_SIDE = 256  # image queries are drawn at one size, whatever the needle's size in the document
LENGTH_MARGIN = 1  # tokens kept free at each band edge: the final recount may differ from the sum by one
MAX_WINDOW_TRIES = 200
LEXICAL_TIER_HELP = (
    "also build the lexically matched tier of the text needles (cells needle-text-lexical-<background>-<length>-"
    "d<depth>, not in the paper): a number-kind needle set whose queries name the number in words and share no "
    "content word with their needle (--llm paraphrases the question; --llm none uses a fixed wording), so BM25 "
    "is at chance; the paper's cells are the same with or without it")


@dataclass(frozen=True)
class Paraphrased:
    """What ``run_steps`` gives ``build_pools``: the sources as ``load_sources`` read them, and the
    lexical tier's question template of each NeedleBench template (id -> question with ``{N}``)
    that the paraphrase step (or its fallback) produced and the contract check passed."""

    sources: Sources
    questions: dict[str, str]


@dataclass
class NeedleConfig(CommonConfig, LLMConfig):
    lengths: tuple[int, ...] = field(
        default=(256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
        metadata={"help": "length targets in tokens (any positive value; 65536 and 131072 work too)"})
    depths: tuple[float, ...] = field(
        default=(0.0, 20.0, 40.0, 60.0, 80.0, 100.0),
        metadata={"help": "needle depths in percent of the haystack (used when --depth-grid is 'given')"})
    depth_grid: str = field(
        default="given", metadata={"help": "'given' uses --depths; 'sigmoid' draws --depth-points depths from "
                                           "0 to 100, denser at the ends", "choices": ("given", "sigmoid")})
    depth_points: int = field(default=6, metadata={"help": "number of depths of the sigmoid grid"})
    backgrounds: tuple[str, ...] = field(
        default=BACKGROUNDS, metadata={"help": "haystack modalities: text, mixed (interleaved), image"})
    needle_modalities: tuple[str, ...] = field(default=NEEDLE_MODALITIES, metadata={"help": "text, image"})
    needles_per_pool: int = field(default=25, metadata={"help": "documents (and queries) per cell (paper: 25)"})
    shared_haystack: bool = field(
        default=False, metadata={"help": "all documents of a cell share one haystack and differ only in the "
                                         "needle (default: each document reads its own stretch of haystack)"})
    band_slack: float = field(
        default=0.05, metadata={"help": "length band of a cell: [L*(1-slack), L] tokens, needle included"})
    image_query: str = field(
        default="text", metadata={"help": "query of an image needle: its text description (text) or the "
                                          "picture itself (image)", "choices": ("text", "image")})
    image_families: tuple[str, ...] = field(
        default=synth.VARYING_ATTRIBUTES,
        metadata={"help": "attributes an image needle family may vary: glyph, position, count"})
    subject_kinds: tuple[str, ...] = field(
        default=SUBJECT_KINDS, metadata={"help": "core entities a text needle family may vary: name, place, number"})
    needle_sets: str = field(
        default="one", metadata={
            "help": "one: a single fixed set of needles per needle modality (the first of --subject-kinds, the "
                    "first of --image-families that holds --needles-per-pool needles) used in every cell, as in the "
                    "paper; per_family: a separate full grid for every listed family, pools named "
                    "needle-<modality>-<family>-<background>-<length>-d<depth>",
            "choices": ("one", "per_family")})
    needle_image_budget: int = field(
        default=64, metadata={"help": "needle image size in tokens (square; 64 = 256x256 px), at most L/8"})
    haystack_image_budget: int = field(
        default=256, metadata={"help": "largest haystack image in tokens (256 = 512x512 px), at most L/8"})
    haystack_jpeg_quality: int = field(default=40, metadata={"help": "JPEG quality of haystack images"})
    needle_jpeg_quality: int = field(default=90, metadata={"help": "JPEG quality of needle and query images"})
    mixed_image_share: float = field(
        default=0.3, metadata={"help": "share of image tokens in a mixed (interleaved) haystack"})
    language: str = field(default="English", metadata={"help": "NeedleBench language of the text needles"})
    hub_documents: int = field(
        default=400, metadata={"help": "without --sources: OBELICS documents read for the text haystack"})
    hub_images: int = field(
        default=200, metadata={"help": "without --sources: OBELICS images fetched for the image haystacks"})
    image_timeout: float = field(
        default=10.0, metadata={"help": "seconds to wait for one OBELICS image URL; failed fetches are skipped"})
    lexical_grid: str = field(
        default="rotated", metadata={
            "help": "cells of the lexical tier: 'rotated' builds each (length, depth) of the grid once, over the "
                    "backgrounds in turn (the i-th length at the t-th depth on background (i + t) mod "
                    "|--backgrounds|: every length meets every depth, and with at least as many depths as "
                    "backgrounds every background meets every length; a third of the cells with three "
                    "backgrounds); 'full' builds every background at every length and depth, as the paper's grid "
                    "(a build then takes about 1.4x its time without the tier)",
            "choices": ("rotated", "full")})
    lexical_tier: bool = field(default=True, metadata={"help": LEXICAL_TIER_HELP})


@dataclass
class Cell:
    """One cell of the grid while it is built: its place in the grid and its needle set, then each
    needle's haystack budget, the stream and per-document start plans its haystacks are cut from,
    and the needle material no haystack of the cell may hold."""

    name: str
    needle_modality: str
    background: str
    band: LengthBand
    depth: float  # nominal, in percent of the haystack
    needles: list[Needle]
    family: dict
    need: dict[str, tuple[int, int]] = field(default_factory=dict)  # needle id -> haystack tokens (lo, hi)
    needle_segments: dict[str, Segment] = field(default_factory=dict)  # image needles, encoded once
    stream: Stream | None = None  # text and mixed backgrounds
    plans: list[list[int]] | None = None  # per document, the stream starts it tries in turn
    forbidden: list[str] = field(default_factory=list)  # lower-cased needles and answers of the cell


@register
class NeedleBuilder(Builder):
    """Visual Grounding: find the one document of a pool that holds the query's needle (a
    NeedleBench fact or a procedurally drawn picture) in a text, image or interleaved haystack."""

    name = "needle"
    # 1.1: one fixed needle set per needle modality for the whole grid
    # 1.2: the lexical tier's cells (``--lexical-tier``) beside the paper's grid; those are unchanged
    # 1.3: the lexical tier's grid rotated over the backgrounds by default (``--lexical-grid``)
    version = "1.3.0"
    task = "visual_grounding"
    title = "MMLongEmbed Visual Grounding: multimodal needles in interleaved haystacks"
    # its rows in the README's builder tables (`make readme` writes them): what it makes, from what
    summary = (
        "Visual Grounding: the full grid (text/image needle x text/mixed/image haystack x 256..32K (and beyond) x 6 "
        "depths), 25 confusable needles per cell, procedurally drawn image needles"
    )
    source_formats = (
        "NeedleBench `needles.jsonl` + `names.json`, plain-text haystacks (Gutenberg, WikiText, Paul Graham "
        "essays), photos"
    )
    config_class = NeedleConfig
    card_template = "needle.md.j2"
    licence = "other"

    # -- sources -------------------------------------------------------------------------
    def load_sources(self, config: NeedleConfig, report: BuildReport) -> Sources:
        self._check_config(config)
        if not config.sources:
            return read_hub_sources(config, self.name, report)
        return read_local_sources(require_dir(config.sources, "needle sources"), config, report)

    def source_identity(self, config: NeedleConfig) -> dict:
        root = Path(config.sources) if config.sources else None
        if root is None:
            return {"kind": "hub", "name": "NeedleBench needles + OBELICS haystack text and images",
                    "needles": {**NEEDLEBENCH.identity, "files": list(NEEDLEBENCH_FILES),
                                "licence": NEEDLEBENCH.licence},
                    "haystack": {**OBELICS.identity, "licence": OBELICS.licence,
                                 "documents": config.hub_documents, "images": config.hub_images}}
        return {"kind": "local", "name": "NeedleBench needles + local haystack text and images",
                "files": files_identity(local_source_paths(root), root)}

    def _check_config(self, config: NeedleConfig) -> None:
        def unknown(values, allowed, flag):
            bad = [v for v in values if v not in allowed]
            if bad:
                raise UserError(f"{flag}: unknown value(s) {bad}; choose from {list(allowed)}")

        unknown(config.backgrounds, BACKGROUNDS, "--backgrounds")
        unknown(config.needle_modalities, NEEDLE_MODALITIES, "--needle-modalities")
        unknown(config.image_families, synth.VARYING_ATTRIBUTES, "--image-families")
        unknown(config.subject_kinds, SUBJECT_KINDS, "--subject-kinds")
        if any(length < 64 for length in config.lengths):
            raise UserError("--lengths: every length must be at least 64 tokens")
        if config.depth_grid == "given" and any(not 0 <= d <= 100 for d in config.depths):
            raise UserError("--depths: every depth must lie in [0, 100]")
        unknown([config.lexical_grid], ("rotated", "full"), "--lexical-grid")
        if not 0 < config.band_slack < 1:
            raise UserError("--band-slack must lie in (0, 1)")
        if config.needles_per_pool < 2:
            raise UserError("--needles-per-pool must be at least 2: one needle alone is not a retrieval task")
        usable = [a for a in config.image_families if synth.attribute_capacity(a) >= config.needles_per_pool]
        if "image" in config.needle_modalities and not usable:
            raise UserError(f"no image family can hold {config.needles_per_pool} distinct needles")

    def depths(self, config: NeedleConfig) -> tuple[float, ...]:
        if config.depth_grid == "sigmoid":
            return sigmoid_depths(config.depth_points)
        return tuple(float(d) for d in config.depths)

    def largest_length(self, sources: Sources, config: NeedleConfig) -> LengthLimit | None:
        """A text or mixed haystack is a window of the text stream (all haystack documents, read
        once): its tokens bound it (a mixed one adds photos to the text, at most its image share).
        Image haystacks draw photos again and again: only memory bounds them (``memory_needed``)."""
        backgrounds = [b for b in config.backgrounds if b in ("text", "mixed")]
        if not backgrounds or not sources.documents:
            return None
        text = sum(default_counter().count_many([t for _, t in sources.documents]))
        share = image_share(config) if backgrounds == ["mixed"] else 0.0
        return LengthLimit(int(text / (1 - share)), f"a {' or '.join(backgrounds)} haystack is a window of the "
                                                    f"{len(sources.documents)} haystack documents, {text} text tokens "
                                                    "in all")

    # bytes a document holds per token, as measured on builds of the sample data (payload on the
    # card: about 5 for text, 70 for JPEG photos), rounded down: only a surely too large build is refused
    BYTES_PER_TOKEN = {"text": 4, "image": 64}

    def memory_needed(self, config: NeedleConfig) -> int | None:
        per_token = {"text": self.BYTES_PER_TOKEN["text"], "image": self.BYTES_PER_TOKEN["image"],
                     "mixed": config.mixed_image_share * self.BYTES_PER_TOKEN["image"]
                     + (1 - config.mixed_image_share) * self.BYTES_PER_TOKEN["text"]}
        sets = sum(len(self.families(modality, config)) for modality in config.needle_modalities)
        cells_per_band = len(self.depths(config)) * sets  # cells of one background and length
        if config.lexical_tier and "text" in config.needle_modalities:  # the lexical tier's, at most
            cells_per_band += max(Counter((b, length) for b, length, _ in self.lexical_grid(config)).values(),
                                  default=0)
        documents = cells_per_band * min(config.needles_per_pool, config.max_queries_per_pool)
        return sum(planned_memory(sorted(set(config.lengths)), documents, per_token[b])
                   for b in set(config.backgrounds) if b in per_token)

    # -- the lexical tier's paraphrases -------------------------------------------------
    @staticmethod
    def _tier_templates(sources: Sources, config: NeedleConfig) -> list[NeedleTemplate]:
        if not (config.lexical_tier and "text" in config.needle_modalities):
            return []
        return parse_templates(sources.needle_records, config.language)[0]  # skips: counted in build_pools

    def run_steps(self, sources: Sources, config: NeedleConfig, report: BuildReport) -> Paraphrased:
        """The paraphrase step of the lexical tier (the LLM of ``--llm``, its fixed wordings under
        ``none``): one question per NeedleBench template, checked against the template."""
        return Paraphrased(sources, self._paraphrases(self._tier_templates(sources, config), config, report))

    @staticmethod
    def _paraphrases(templates: list[NeedleTemplate], config: NeedleConfig, report: BuildReport) -> dict[str, str]:
        if not templates:
            return {}
        by_id = {t.id: t for t in templates}
        return paraphrase_queries(
            [(t.id, paraphrase.paraphrase_fields(t)) for t in templates], config, report,
            check=lambda rid, question: paraphrase.paraphrase_problem(question, by_id[rid]),
            fallback=lambda rid: paraphrase.fallback_question(by_id[rid]))

    # -- pools ---------------------------------------------------------------------------
    def build_pools(self, sources: Sources | Paraphrased, config: NeedleConfig, report: BuildReport) -> list[Pool]:
        """Pure: the sources (with the paraphrases ``run_steps`` made) in, the grid's cells out.
        Given bare sources (a direct call), the lexical tier takes the fallback's questions."""
        self._check_config(config)
        if isinstance(sources, Paraphrased):
            sources, questions = sources.sources, sources.questions
        else:
            tier_templates = self._tier_templates(sources, config)
            questions = {t.id: q for t in tier_templates if (q := paraphrase.fallback_question(t)) is not None}
        counter = default_counter()
        templates, template_skips = parse_templates(sources.needle_records, config.language)
        for reason, n in template_skips.items():
            for _ in range(n):
                report.skip(reason)
        if "text" in config.needle_modalities and not templates:
            raise UserError("no usable NeedleBench needle template (needle, retrieval_question, arg1, arg2)")
        context = PoolContext(self.name, config, counter, report)
        haystacks = Haystacks(sources.documents, sources.photos, config, counter, context.rng)
        n_per_pool = min(config.needles_per_pool, config.max_queries_per_pool)
        needle_sets = [(modality, family, *draw_needle_set(modality, family, templates, sources.names,
                                                           haystacks.corpus_lower, n_per_pool,
                                                           context.rng("needle-set", f"{modality}-{family}")))
                       for modality in config.needle_modalities for family in self.families(modality, config)]
        paper_sets = len(needle_sets)
        if config.lexical_tier and "text" in config.needle_modalities:
            needle_sets += self._lexical_needle_set(templates, questions, sources, haystacks, n_per_pool, context)
        paper_grid, lexical_grid = self.grid(config), self.lexical_grid(config)
        cells = [(i >= paper_sets, needle_set, b, LengthBand.tight(length, config.band_slack), d)
                 for i, needle_set in enumerate(needle_sets)
                 for b, length, d in (lexical_grid if i >= paper_sets else paper_grid)]
        pools = []
        for lexical, (needle_modality, family_name, needles, family), background, band, depth in report.bar(
                cells, "building cells", "pool", min_items=8):
            name = cell_name(needle_modality, background, band, depth,
                             family_name if config.needle_sets == "per_family" or lexical else None)
            cell = Cell(name, needle_modality, background, band, depth, needles, family)
            pool = self._build_cell(cell, haystacks, context)
            if pool is not None and lexical:
                pool.difficulty = LEXICAL
            if pool is not None:
                pools.append(pool)
        # measured here for the notes below; the build reuses them
        words: dict[str, list[str]] = {}  # every cell's haystacks are cut from the same streams
        for pool in report.bar(pools, "BM25 shortcut check", "pool", min_items=8):
            report.shortcuts[pool.name] = shortcut_check(pool, words)
        for modality, figures in sorted(confusability(pools, report.shortcuts)["by_modality"].items()):
            shown = ", ".join(f"{length}: {p:.3f}" for length, p in sorted(figures.items()))
            report.notes.append(f"BM25 P@1 of {modality}-needle queries against their pools, by length: {shown}")
        return pools

    @staticmethod
    def _lexical_needle_set(templates: list[NeedleTemplate], questions: dict[str, str], sources: Sources,
                            haystacks: Haystacks, n: int, context: PoolContext) -> list[tuple]:
        """The lexical tier's needle set, as ``build_pools`` lists sets (its family name ``lexical``
        goes into the cell names), or none, with a counted skip, where it cannot be drawn; each
        needle whose query fails the final check (no word shared with the needle, its number
        named) is left out, counted."""
        try:
            needles, family = draw_lexical_needle_set(
                templates, questions, sources.names, haystacks.corpus_lower, n,
                context.rng("needle-set", LEXICAL_LABEL))
        except ValueError as error:
            context.report.skip("lexical_no_needle_set", str(error))
            return []
        kept = []
        for needle in needles:
            why = paraphrase.query_problem(needle.question, needle.text, needle.spec_json["subject"])
            if why is not None:
                context.report.skip(why, needle.id)
                continue
            kept.append(needle)
        if len(kept) < 2:
            context.report.skip("lexical_no_needle_set", "fewer than two needles kept")
            return []
        return [("text", "lexical", kept, family)]

    def grid(self, config: NeedleConfig) -> list[tuple[str, int, float]]:
        """(background, length, depth) of every cell of the paper's grid, for each needle set."""
        return [(b, length, d) for b in config.backgrounds for length in sorted(set(config.lengths))
                for d in self.depths(config)]

    def lexical_grid(self, config: NeedleConfig) -> list[tuple[str, int, float]]:
        """The cells of the lexical tier (``--lexical-grid``), in the paper grid's order: all of
        them, or each (length, depth) once, the backgrounds taken in turn along both (a Latin
        rotation: with three backgrounds and six depths, each length meets every depth once and
        each background at two depths). A rotated cell is the full grid's cell of its name, row
        for row: a cell's draws come from its name alone."""
        if config.lexical_grid == "full":
            return self.grid(config)
        lengths, depths, backgrounds = sorted(set(config.lengths)), self.depths(config), config.backgrounds
        kept = {(backgrounds[(i + t) % len(backgrounds)], length, d)
                for i, length in enumerate(lengths) for t, d in enumerate(depths)}
        return [cell for cell in self.grid(config) if cell in kept]

    @staticmethod
    def families(needle_modality: str, config: NeedleConfig) -> list[str]:
        """The needle families of the build for one modality: the first usable one (one fixed
        set for the whole grid), or every usable one (``--needle-sets per_family``)."""
        n = min(config.needles_per_pool, config.max_queries_per_pool)
        if needle_modality == "text":
            usable = list(config.subject_kinds)
        else:
            usable = [a for a in config.image_families if synth.attribute_capacity(a) >= n]
        return usable if config.needle_sets == "per_family" else usable[:1]

    def _haystack_plans(self, cell: Cell, need_hi: int, haystacks: Haystacks, context: PoolContext):
        """Per document, the start indices to try in its stream (text and mixed backgrounds)."""
        if cell.background == "image":
            return None, None
        stream = haystacks.text_stream if cell.background == "text" else haystacks.mixed_stream(cell.band.target)
        plans = stream.stratified_starts(len(cell.needles), need_hi, context.rng(cell.name, "haystack"))
        if context.config.shared_haystack:
            plans = [plans[0]] * len(cell.needles)
        return stream, plans

    def _pool_of(self, cell: Cell, config: NeedleConfig) -> Pool:
        """The cell's empty pool, with the facts of its place in the grid."""
        image_needle = cell.needle_modality == "image"
        pool = Pool(name=cell.name, task=self.task, dataset=self.name, difficulty="grid", band=cell.band,
                    modality=pool_modality(cell.needle_modality, cell.background),
                    query_modality="image" if image_needle and config.image_query == "image" else "text",
                    depth=cell.depth)
        pool.facts = {"needle_modality": cell.needle_modality, "background": cell.background,
                      "needle_family": cell.family["id"], "family": cell.family,
                      "haystack": "shared" if config.shared_haystack else "distinct",
                      "image_query": config.image_query if image_needle else None, "band_slack": config.band_slack}
        return pool

    @staticmethod
    def _budget_haystacks(cell: Cell, config: NeedleConfig, counter) -> bool:
        """Each needle's haystack budget (the band minus the needle, whichever spacing it gets) and
        each image needle's segment, encoded once; False when a needle leaves no haystack room."""
        side = needle_side(config.needle_image_budget, cell.band.target)
        for needle in cell.needles:
            if cell.needle_modality == "image":
                data, h, w = encode_needle(needle.spec, side, config.needle_jpeg_quality)
                cell.needle_segments[needle.id] = image_segment(data, h, w, kind=IMAGE, origin="needle")
                shortest = longest = image_tokens(h, w)
            else:
                t = needle.text
                counts = counter.count_many([t, " " + t, t + "\n", " " + t + " "])
                shortest, longest = min(counts), max(counts)
            cell.need[needle.id] = (cell.band.lo + LENGTH_MARGIN - shortest, cell.band.hi - LENGTH_MARGIN - longest)
        if config.shared_haystack:  # one haystack must fit every needle of the cell
            common = (max(lo for lo, _ in cell.need.values()), min(hi for _, hi in cell.need.values()))
            cell.need = {needle_id: common for needle_id in cell.need}
        return not any(hi < 1 or lo > hi for lo, hi in cell.need.values())

    def _build_cell(self, cell: Cell, haystacks: Haystacks, context: PoolContext) -> Pool | None:
        config, report = context.config, context.report
        pool = self._pool_of(cell, config)
        if not self._budget_haystacks(cell, config, context.counter):
            report.skip("needle_larger_than_band", cell.name)
            return None
        widest = max(hi for _, hi in cell.need.values())
        cell.stream, cell.plans = self._haystack_plans(cell, widest, haystacks, context)
        cell.forbidden = ([nd.text.lower() for nd in cell.needles if nd.text]
                          + [nd.answer.lower() for nd in cell.needles if nd.answer])
        if "paraphrase_template" in cell.family:  # the lexical tier: a haystack naming a query's number
            cell.forbidden += [paraphrase.number_words(paraphrase.subject_number(nd.spec_json["subject"]))
                               for nd in cell.needles]  # in words would answer it in a needle's stead
        placed = []
        for k, needle in enumerate(cell.needles):
            made = self._place(needle, k, cell, haystacks, context)
            if made is None:
                report.skip("no_haystack_window_in_band", f"{cell.name}/{needle.id}")
                continue
            placed.append((needle, made))
        if len(placed) < 2:
            report.skip("cell_without_enough_documents", cell.name)
            return None
        self._fill(pool, placed, cell, context)
        return pool

    def _fill(self, pool: Pool, placed: list, cell: Cell, context: PoolContext) -> None:
        """The placed documents as the pool's candidates, in a seeded order (candidate order says
        nothing about the needle), and one query per needle, in needle order."""
        instruction = TEXT_INSTRUCTION if cell.needle_modality == "text" else (
            IMAGE_IMAGE_INSTRUCTION if pool.query_modality == "image" else IMAGE_TEXT_INSTRUCTION)
        for index in context.rng(cell.name, "candidate-order").permutation(len(placed)):
            needle, made = placed[int(index)]
            document, n_tokens, provenance, extra = made
            qid, cid = f"q:{needle.id}", f"d:{needle.id}"
            pool.candidates.append(Candidate(
                id=cid, document=document, role=POSITIVE, group=qid, source_id=needle.id, n_tokens=n_tokens,
                provenance=provenance, extra={**extra, "depth": float(cell.depth)}))
        for needle, _ in placed:
            qid = f"q:{needle.id}"
            if pool.query_modality == "image":
                query_image, h, w = encode_needle(needle.spec, QUERY_IMAGE_SIDE, context.config.needle_jpeg_quality)
                query = Query(id=qid, text=IMAGE_PLACEHOLDER, instruction=instruction, source_id=needle.id,
                              n_tokens=image_tokens(h, w), images=[query_image])
            else:
                query = Query(id=qid, text=needle.question, instruction=instruction, source_id=needle.id,
                              n_tokens=context.counter.count(needle.question))
            query.extra = {"needle_id": needle.id, "needle_family": needle.family,
                           "needle_spec": json.dumps(needle.spec_json, sort_keys=True, ensure_ascii=False)}
            pool.queries.append(query)
            pool.qrels.append((qid, f"d:{needle.id}", 1))

    @staticmethod
    def _windows(k: int, need: tuple[int, int], cell: Cell, haystacks: Haystacks,
                 context: PoolContext) -> Iterator[tuple[list[Segment], int | None]]:
        """The haystack windows (with their stream start) that document ``k`` of the cell tries in
        turn: an image haystack drawn afresh at each attempt, or the stream's window from each start
        of the document's plan that fits ``need`` (haystack tokens lo, hi)."""
        need_lo, need_hi = need
        shared_key = "shared" if context.config.shared_haystack else k
        for attempt in range(MAX_WINDOW_TRIES):
            if cell.background == "image":
                rng = context.rng(cell.name, "image-haystack", shared_key, attempt)
                window = haystacks.image_haystack(cell.band.target, need_lo, need_hi, rng)
                if window is not None:
                    yield window, None
                continue
            plan = cell.plans[k]
            if attempt >= len(plan):
                return
            start = plan[attempt]
            end = cell.stream.window_end(start, need_lo, need_hi)
            if end is not None:
                yield cell.stream.segments[start:end], start

    def _place(self, needle: Needle, k: int, cell: Cell, haystacks: Haystacks, context: PoolContext):
        """Cut a haystack, put the needle at the nearest boundary to the cell's depth, recount. Tries
        other haystack windows until the document lies in the band and no needle or answer of the
        pool occurs in its haystack. Returns (document, n_tokens, provenance, extra) or None."""
        counter, depth = context.counter, cell.depth / 100
        for window, start in self._windows(k, cell.need[needle.id], cell, haystacks, context):
            haystack_text = "".join(s.text for s in window).lower()
            if any(f in haystack_text for f in cell.forbidden):
                continue
            boundary, _, haystack_tokens = nearest_boundary(window, depth)
            document = insert_needle(window, boundary, needle.text, cell.needle_segments.get(needle.id),
                                     f"d:{needle.id}", counter)
            n_tokens = exact_tokens(document, counter)
            if not cell.band.contains(n_tokens):
                continue
            segment, text, char_range, token_index = locate_needle(
                document, needle.text if needle.modality == "text" else None, counter)
            realised = token_index / max(1, n_tokens - segment.tokens)
            provenance = {
                "needle_id": needle.id, "needle_modality": needle.modality, "needle_char_range": char_range,
                "needle_tokens": segment.tokens, "nominal_depth": depth,
                "haystack": {"background": cell.background, "tokens": haystack_tokens,
                             "stream_start_segment": start, "shared": context.config.shared_haystack,
                             "sources": sorted({s.origin for s in window})},
            }
            if needle.modality == "text":
                provenance.update(needle_text=needle.text, answer=needle.answer)
            else:
                provenance.update(needle_image_index=text[:char_range[0]].count(IMAGE_PLACEHOLDER),
                                  needle_sha256=hashlib.sha256(segment.image).hexdigest())
            extra = {"realised_depth": round(min(1.0, realised), 6), "realised_token_index": token_index,
                     "needle_family": needle.family, "needle_id": needle.id, "background": cell.background,
                     "needle_modality": needle.modality}
            return document, n_tokens, provenance, extra
        return None

    # -- checks and card -----------------------------------------------------------------
    def validate_pool(self, pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterable[Problem]:
        return check_needle_pool(pool_row, corpus, queries, qrels)

    def example_config(self, directory) -> NeedleConfig:
        from builders._needle_fixtures import write_needle_sources

        write_needle_sources(Path(directory))
        return NeedleConfig(sources=str(directory), lengths=(256, 512), depths=(0.0, 100.0), needles_per_pool=4)

    def card_context(self, config: NeedleConfig, pools: list[Pool], report: BuildReport) -> dict:
        statistics = card_statistics(pools, report.shortcuts)
        return {
            "needle_sets": statistics["needle_sets"],
            "instructions": {"text": TEXT_INSTRUCTION, "image_text": IMAGE_TEXT_INSTRUCTION,
                             "image_image": IMAGE_IMAGE_INSTRUCTION},
            "depths": list(self.depths(config)),
            "cells": statistics["cells"],
            "payload_total_mb": statistics["payload_total_mb"],
            "confusability": statistics["confusability"],
            "sources": card_sources(local=bool(config.sources)),
        }
