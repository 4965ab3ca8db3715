"""GovReport Logical Summarization (paper §3.2.3, appendix A.3).

The query is an expert-written summary; the positive is its report. Reports are bucketed into
length pools by their natural length. The easy and the hard pool of one length hold the same
queries (a paired comparison). The easy pool pairs each positive with three other,
unmodified reports of the same band; the hard pool pairs it with three variants of itself in
which the first 25%, the last 25% or the middle 50% of its tokens (cut at paragraph boundaries)
is replaced by a length-matched block of paragraphs from its BM25 donor, the most similar other
report, so that a model must read the whole document to tell them apart.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from mmlongembed.bm25 import BM25Index, bm25_tokenize
from mmlongembed.capacity import LengthLimit, halving_limit, longest_text_tokens
from mmlongembed.builder import Builder, BuildReport, CommonConfig, Problem, register
from mmlongembed.documents import text_document
from mmlongembed.errors import FitError, UserError
from mmlongembed.manifest import files_identity
from mmlongembed.ops.donor import content_sha256, exchangeable_offsets, replace_span_with_donor
from mmlongembed.ops.length import truncate_to_band
from mmlongembed.pools import EASY_NEGATIVE, HARD_NEGATIVE, POSITIVE, Candidate, LengthBand, Pool, Query, pool_name
from mmlongembed.rng import derive_rng
from mmlongembed.sources import HubSource, hub_rows, iter_jsonl, read_json, require_dir
from mmlongembed.text import normalise_whitespace
from mmlongembed.tokens import default_counter

INSTRUCTION = "Given this summary, retrieve the original corresponding long document."
# The parquet conversion of GovReport (report, summary; no id column): the original
# launch/gov_report needs a loading script, which current `datasets` no longer runs.
HUB_SOURCE = HubSource(
    repo="ccdv/govreport-summarization", revision="4e21184e01ae8017e2c036e180fe5e541fef60a0", config="document",
    split="test", licence="CC BY 4.0",
)
ZEROSCROLLS_PREFIX = "You are given a report by a government agency. Write a one-page summary of the report.\n\nReport:\n"
ZEROSCROLLS_SUFFIX = "\n\nSummary:\n"
HARD_VARIANTS = (("head25", (0.0, 0.25)), ("tail25", (0.75, 1.0)), ("middle50", (0.25, 0.75)))
SHINGLE_WORDS = 8


@dataclass
class GovReportConfig(CommonConfig):
    lengths: tuple[int, ...] = field(
        default=(8192, 16384, 32768),
        metadata={"help": "pool length targets in tokens; pool T holds reports of natural length in (T/2, T], "
                          "reports longer than the largest T are cut to it at a paragraph boundary"},
    )
    negatives_per_query: int = field(default=3, metadata={"help": "easy negatives per query (paper: 3)"})
    donor_candidates: int = field(
        default=10, metadata={"help": "how many top BM25 reports are tried as donor before the query is skipped"})
    near_duplicate_jaccard: float = field(
        default=0.5,
        metadata={"help": f"a report whose {SHINGLE_WORDS}-word shingles overlap the source's by at least this "
                          "Jaccard index is a near-duplicate and never a donor"},
    )


@dataclass(frozen=True)
class Report:
    id: str
    report: str
    summary: str
    origin: str


def _shingles(text: str) -> set[int]:
    words = text.lower().split()
    return {hash(" ".join(words[i:i + SHINGLE_WORDS])) for i in range(max(1, len(words) - SHINGLE_WORDS + 1))}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _clean(text) -> str:
    """GAO reports double-space their sentences, CRS and L-Eval texts do not: one convention for
    all, one paragraph per line, so a donor block never differs from its host in its spacing."""
    return normalise_whitespace(text) if isinstance(text, str) else ""


def _content_id(prefix: str, body) -> str:
    """An id for sources without one: stable across row order, from the report's text."""
    return f"{prefix}-" + hashlib.sha256(_clean(body).encode()).hexdigest()[:12]


def read_local_reports(root: Path, report: BuildReport) -> Iterator[Report]:
    """GovReport's original JSONL (`id`, `report`|`document`, `summary`), L-Eval's JSONL
    (`input`, `outputs`) and ZeroSCROLLS' paired `*_input.json` / `*_output.json` files."""
    for path in sorted(root.rglob("*.jsonl")):
        for number, record in enumerate(iter_jsonl(path, report), 1):
            if "input" in record and "outputs" in record:  # L-Eval
                outputs = record.get("outputs") or []
                summary = outputs[0] if isinstance(outputs, list) and outputs else ""
                body = record.get("input")
                rid = _content_id("leval", body)
            else:
                body = record.get("report", record.get("document"))
                summary = record.get("summary")
                if isinstance(body, list):  # some GovReport dumps keep paragraphs as a list
                    body = "\n".join(str(p) for p in body)
                if isinstance(summary, list):
                    summary = "\n".join(str(p) for p in summary)
                rid = str(record.get("id") or f"{path.stem}-{number}")
            yield Report(rid, _clean(body), _clean(summary), f"{path.name}:{number}")
    for input_path in sorted(root.rglob("*_input.json")):
        output_path = input_path.with_name(input_path.name.replace("_input.json", "_output.json"))
        inputs, outputs = read_json(input_path, report), read_json(output_path, report) if output_path.exists() else {}
        if not isinstance(inputs, dict):
            continue
        for rid, body in inputs.items():
            if isinstance(body, str):
                body = body.removeprefix(ZEROSCROLLS_PREFIX).removesuffix(ZEROSCROLLS_SUFFIX)
            yield Report(str(rid), _clean(body), _clean((outputs or {}).get(rid)), input_path.name)


@register
class GovReportBuilder(Builder):
    """Logical Summarization from GovReport: find the report behind a summary, against reports
    whose head, tail or middle was swapped for a BM25-similar report's paragraphs."""

    name = "govreport"
    # 1.1: Hub source is the parquet GovReport (ccdv/govreport-summarization)
    # 1.2: the easy and hard pools of one length share their queries (paired)
    version = "1.2.0"
    # a variant mixing in a quarter to a half of another report has more distinct words and more
    # words used once (the paper's design): reported in the card, not a build failure
    design_signals = ("type_token_ratio", "hapax_share")
    task = "logical_summarization"
    title = "MMLongEmbed Logical Summarization: GovReport"
    config_class = GovReportConfig
    card_template = "govreport.md.j2"
    licence = "cc-by-4.0"

    # -- sources -------------------------------------------------------------------------
    def load_sources(self, config: GovReportConfig, report: BuildReport) -> list[Report]:
        if config.sources:
            root = require_dir(config.sources, "GovReport JSONL, L-Eval JSONL or ZeroSCROLLS JSON files")
            records = read_local_reports(root / "govreport" if (root / "govreport").is_dir() else root, report)
        else:
            records = (
                Report(str(r.get("id") or _content_id("govreport", r.get("report"))),
                       _clean(r.get("report", r.get("document"))), _clean(r.get("summary")), f"hub:{number}")
                for number, r in enumerate(hub_rows(HUB_SOURCE, self.name), 1)
            )
        kept, seen, seen_ids = [], {}, {}
        for r in records:
            if not r.report:
                report.skip("empty_report", r.origin)
            elif not r.summary:
                report.skip("missing_summary", r.origin)
            else:
                digest = hashlib.sha256(r.report.encode()).hexdigest()
                if digest in seen:
                    report.skip("duplicate_report", f"{r.origin} repeats {seen[digest]}")
                    continue
                if r.id in seen_ids:  # same id, another text: the first one read is kept
                    report.skip("duplicate_id", f"{r.origin} reuses id {r.id} of {seen_ids[r.id]}")
                    continue
                seen[digest] = r.origin
                seen_ids[r.id] = r.origin
                kept.append(r)
        if not kept and config.sources:
            raise UserError(f"no usable GovReport record under {config.sources}")
        return sorted(kept, key=lambda r: r.id)

    def source_identity(self, config: GovReportConfig) -> dict:
        if config.sources:
            root = Path(config.sources)
            root = root / "govreport" if (root / "govreport").is_dir() else root
            files = [*root.rglob("*.jsonl"), *root.rglob("*_input.json"), *root.rglob("*_output.json")]
            return {"kind": "local", "name": "GovReport", "licence": HUB_SOURCE.licence,
                    "files": files_identity(files, root)}
        return {"kind": "hub", "name": "GovReport", "licence": HUB_SOURCE.licence, **HUB_SOURCE.identity}

    # -- pools ---------------------------------------------------------------------------
    def largest_length(self, records: list[Report], config: GovReportConfig) -> LengthLimit | None:
        """Reports keep their natural length (a longer one is only ever cut): the longest bounds it."""
        if not records:
            return None
        return halving_limit(longest_text_tokens([r.report for r in records], default_counter()), "the longest report")

    def build_pools(self, records: list[Report], config: GovReportConfig, report: BuildReport) -> list[Pool]:
        counter = default_counter()
        bands = [LengthBand.halving(t) for t in sorted(set(config.lengths))]
        documents = {
            r.id: text_document(r.id, r.report, counter)
            for r in report.bar(records, "tokenising reports", "report")
        }
        summaries = {r.id: r.summary for r in records}
        bucket_of: dict[str, LengthBand] = {}
        for r in records:
            natural = documents[r.id].tokens
            band = next((b for b in bands if b.lo <= natural <= b.hi), bands[-1] if natural > bands[-1].hi else None)
            if band is None:
                report.skip("too_short_for_any_pool", f"{r.id} ({natural} tokens)")
            else:
                bucket_of[r.id] = band
        index = BM25Index.from_texts([r.report for r in records])
        ids = [r.id for r in records]

        pools = []
        shingles: dict[str, set] = {}

        def shingles_of(rid):
            if rid not in shingles:
                shingles[rid] = _shingles(documents[rid].render()[0])
            return shingles[rid]

        for band in bands:
            members = [rid for rid in ids if bucket_of.get(rid) == band]
            longer = [rid for rid in ids if rid in bucket_of and bucket_of[rid].target > band.target]
            pools.extend(self._paired_pools(band, members, longer, ids, documents, summaries, index, shingles_of,
                                            config, report))
        return pools

    def _query(self, rid: str, summaries: dict[str, str]) -> Query:
        return Query(id=f"q:{rid}", text=summaries[rid], instruction=INSTRUCTION, source_id=rid,
                     n_tokens=default_counter().count(summaries[rid]))

    def _positive(self, rid: str, fitted, documents) -> Candidate:
        return Candidate(
            id=f"d:{rid}", document=fitted.document, role=POSITIVE, group=f"q:{rid}", source_id=rid,
            n_tokens=fitted.n_tokens,
            provenance={"variant": "original", "truncated": fitted.document.tokens < documents[rid].tokens})

    def _paired_pools(self, band, members, longer, all_ids, documents, summaries, index, shingles_of, config,
                      report) -> tuple[Pool, Pool]:
        """The easy and the hard pool of one length, over the same queries (the paper's paired
        comparison: the two pools differ only in their negatives).

        Reports of the band are taken in one seeded order; a report becomes a query when its three
        hard variants can be built, until the cap or the supply of easy negatives is reached. The
        easy negatives are the band's reports that are not queries (unmodified), then reports of
        longer bands cut at a paragraph boundary to a length drawn from the positives' lengths
        (counted in the card); if too few can be cut, the last queries leave both pools."""
        counter = default_counter()
        easy = Pool(name=pool_name(self.name, "easy", band), task=self.task, dataset=self.name,
                    difficulty="easy", band=band)
        hard = Pool(name=pool_name(self.name, "hard", band), task=self.task, dataset=self.name,
                    difficulty="hard", band=band)
        label = f"{self.name}-{band.name}"
        rng = derive_rng(config.seed, self.name, label, "order")
        fitted = {}
        for i in rng.permutation(len(members)):
            rid = members[int(i)]
            try:
                fitted[rid] = truncate_to_band(documents[rid], band, counter)
            except FitError as error:
                report.skip(f"positive_{error.reason}", rid)
        order = list(fitted)
        k = config.negatives_per_query
        # Q queries leave len(order) - Q unmodified reports and the longer ones for k*Q negatives.
        cap = min(config.max_queries_per_pool, (len(order) + len(longer)) // (k + 1))
        chosen: list[tuple[str, list]] = []
        for rid in report.bar(order, f"{hard.name}: hard negatives", "report"):
            if len(chosen) >= cap:
                break
            donors = self._donors(rid, all_ids, summaries, index, shingles_of, config)
            variants = self._hard_variants(rid, fitted[rid], donors, band, hard.name, documents, counter, config)
            if variants is None:
                report.skip("hard_no_donor_block", rid)
                continue
            chosen.append((rid, variants))

        query_ids = {rid for rid, _ in chosen}
        negatives: list[tuple[str, object, bool]] = [  # (report, fitted, cut): the top band cuts longer reports too
            (rid, fitted[rid], fitted[rid].document.tokens < documents[rid].tokens) for rid in order if rid not in query_ids]
        positive_lengths = [fitted[rid].n_tokens for rid, _ in chosen]
        for i in rng.permutation(len(longer)):
            if len(negatives) >= k * len(chosen):
                break
            rid = longer[int(i)]
            target = positive_lengths[int(rng.integers(len(positive_lengths)))]
            try:
                negatives.append((rid, truncate_to_band(documents[rid], band, counter, target=target), True))
            except FitError as error:
                report.skip(f"easy_negative_{error.reason}", rid)
        if len(negatives) < k * len(chosen):  # some cuts failed: fewer queries, never fewer negatives each
            for rid, _ in chosen[len(negatives) // k:]:
                report.skip("not_enough_easy_negatives", rid)
            chosen = chosen[: len(negatives) // k]
        negatives = [negatives[int(i)] for i in rng.permutation(len(negatives))][: k * len(chosen)]

        for q, (rid, variants) in enumerate(chosen):
            query, positive = self._query(rid, summaries), self._positive(rid, fitted[rid], documents)
            easy.add_query(query, positive, [Candidate(
                id=f"d:{neg_rid}", document=neg.document, role=EASY_NEGATIVE, group=f"q:{rid}", source_id=neg_rid,
                n_tokens=neg.n_tokens, provenance={"variant": "other_report", "truncated": truncated})
                for neg_rid, neg, truncated in negatives[q * k:(q + 1) * k]])
            hard.add_query(query, positive, [Candidate(
                id=f"d:{rid}:{variant}", document=made.document, role=HARD_NEGATIVE, group=f"q:{rid}",
                source_id=rid, n_tokens=made.n_tokens, provenance=made.provenance) for variant, made in variants])
        return easy, hard

    def _donors(self, rid, all_ids, summaries, index, shingles_of, config) -> list[tuple[int, str, float]]:
        """(BM25 rank, report id, score) of the donor candidates, best first: the reports the
        summary retrieves from the whole corpus, less the source itself and its near-duplicates."""
        ranked = index.top_k(bm25_tokenize(summaries[rid]), config.donor_candidates + 1)
        donors = []
        for rank, (i, score) in enumerate(ranked):
            other = all_ids[i]
            if other == rid or _jaccard(shingles_of(rid), shingles_of(other)) >= config.near_duplicate_jaccard:
                continue
            donors.append((rank, other, score))
        return donors

    def _hard_variants(self, rid, positive, donors, band, pool_label, documents, counter, config):
        """The three variants (head25, tail25, middle50), each from the best donor that can fill
        its span; None when one of them cannot be made."""
        variants = []
        offsets = exchangeable_offsets(
            positive.n_tokens, len(HARD_VARIANTS), derive_rng(config.seed, self.name, pool_label, rid, "offsets"))
        for (variant, fraction), offset in zip(HARD_VARIANTS, offsets):
            rng = derive_rng(config.seed, self.name, pool_label, rid, variant)
            made = None
            for rank, donor_id, score in donors:
                try:
                    made = replace_span_with_donor(
                        positive.document, positive.n_tokens, fraction, documents[donor_id], band, counter, rng,
                        length_offset=offset)
                except FitError:
                    continue
                made.provenance.update(variant=variant, donor_bm25_rank=rank, donor_bm25_score=round(score, 4),
                                       source_id=rid)
                break
            if made is None:
                return None
            variants.append((variant, made))
        return variants

    # -- checks and card -----------------------------------------------------------------
    def validate_pool(self, pool_row: dict, corpus: dict, queries: dict, qrels: dict) -> Iterable[Problem]:
        name = pool_row["pool"]
        text_of = dict(zip(corpus["_id"], corpus["text"]))
        positive_of = {q: c for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]) if s > 0}
        for cid, role, group, raw in zip(corpus["_id"], corpus["role"], corpus["group"], corpus["provenance"]):
            if role != HARD_NEGATIVE:
                continue
            provenance = json.loads(raw)
            positive_text = text_of.get(positive_of.get(group, ""), "")
            a, b = provenance["replaced_char_range"]
            replaced = positive_text[a:b]
            if content_sha256(replaced) != provenance["replaced_sha256"]:
                yield Problem(name, "replaced_span", f"{cid}: recorded span does not match its positive")
            elif replaced and replaced in text_of[cid]:
                yield Problem(name, "replaced_span", f"{cid} still contains the replaced span")
            c, d = provenance["block_char_range"]
            if content_sha256(text_of[cid][c:d]) != provenance["block_sha256"]:
                yield Problem(name, "donor_block", f"{cid} does not contain its donor block where recorded")

    def example_config(self, directory) -> GovReportConfig:
        from mmlongembed.testing import write_govreport_jsonl

        write_govreport_jsonl(Path(directory) / "reports.jsonl", n_reports=16, paragraphs=(5, 30))
        return GovReportConfig(sources=str(directory), lengths=(2048, 4096), max_queries_per_pool=4)

    def card_context(self, config: GovReportConfig, pools: list[Pool], report: BuildReport) -> dict:
        composition = []
        for pool in pools:
            negatives = [c for c in pool.candidates if c.role == EASY_NEGATIVE]
            composition.append({
                "pool": pool.name, "queries": len(pool.queries),
                "positives_cut": sum(1 for c in pool.candidates if c.role == POSITIVE and c.provenance["truncated"]),
                "easy_negatives": len(negatives),
                "easy_negatives_cut": sum(1 for c in negatives if c.provenance["truncated"]),
                "donor_ranks": sorted({c.provenance["donor_bm25_rank"] for c in pool.candidates
                                       if c.role == HARD_NEGATIVE}),
            })
        paired = all(sorted(q.id for q in easy.queries) == sorted(q.id for q in hard.queries)
                     for easy in pools for hard in pools
                     if easy.difficulty == "easy" and hard.difficulty == "hard" and easy.band == hard.band)
        return {
            "instruction": INSTRUCTION,
            "composition": composition,
            "paired": paired,
            "hard_variants": [v for v, _ in HARD_VARIANTS],
            "sources": [{
                "name": "GovReport (Huang et al., NAACL 2021)", "licence": HUB_SOURCE.licence,
                "identity": (f"local files under `{Path(config.sources).name}` (sha256 in manifest.json)"
                             if config.sources else f"`{HUB_SOURCE.repo}` @ `{HUB_SOURCE.revision}`"),
            }],
        }
