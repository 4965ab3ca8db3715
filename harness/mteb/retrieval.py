"""A release's pools through ``mteb.evaluate``, scored as the paper and the harness score them.

A release is laid out as MTEB's retrieval layout (``<pool>-corpus|queries|qrels`` configs, one
hf_subset per pool), so ``mteb.evaluate`` reads it as it is. Scored that way with a plain
sentence-transformers model, the figures are not the paper's. What differs (all-MiniLM-L6-v2 on
the HotpotQA pools, measured: docs/LAYOUT.md "Scoring with MTEB"):

- truncation: sentence-transformers keeps the first ``max_seq_length`` word pieces and drops the
  tail; the paper and the harness drop the middle (``harness.scoring.truncation``), so the end of a long
  candidate, where evidence and hard-negative edits also sit, still counts;
- the query: mteb appends the queries' ``instruction`` column to the text
  (``"<query> <instruction>"``); the harness gives each model its own template (MiniLM and
  ``st:`` models the bare query, ``hf:``/``vllm:`` models ``Instruct: ...\\nQuery: ...``);
- ties: pytrec_eval puts the tied candidate with the larger id first, which with opaque ids is a
  coin toss per query; the harness takes the expected value over the tied orders. MiniLM reads
  256 word pieces of a 8K-32K candidate, so a positive and its hard negatives, which differ in
  the middle, tie for almost every hard query: there mteb's P@1 is one draw, the harness's its mean.

The same in both: a document's ``title`` (empty in every build; mteb would prepend one, the
harness ignores it), edge whitespace (builds are stripped, mteb strips), cosine similarity on
unit vectors (MiniLM's own similarity function).

This module gives the paper's protocol to ``mteb.evaluate``:

- ``PaperProtocolEncoder`` wraps any harness dense model (``minilm``, ``st:``, ``hf:``,
  ``openai:``, ...): the query is formatted by the model's own template from the raw query and
  instruction, every input goes through the harness's ``embed`` (middle truncation on the
  model's tokenizer, or on the Qwen3 yardstick for servers), identical inputs get one vector;
- ``release_task`` makes a release's text pools one mteb retrieval task (one hf_subset per
  pool) whose main score is ``tie_aware_precision_at_1``: the harness's tie-aware P@1
  (``harness.scoring.metrics``), computed from mteb's own retrieval results. mteb's
  ``precision_at_1`` stays beside it (equal where nothing ties).

    import mteb
    from harness.mteb.retrieval import make_encoder, release_task
    result = mteb.evaluate(make_encoder("minilm"), release_task("out/hotpotqa"), cache=None)

``python -m harness.mteb.retrieval --dataset out/hotpotqa --model minilm [--plain] [--json FILE]``
prints the figures per pool as a table (``--json``: every figure, to a file; ``--plain``: the
model through sentence-transformers' own encode, as a user who passes it to mteb directly gets
them), with progress bars as ``mmle score`` shows, and embeds through ``mmle score``'s embedding
cache (``--cache-dir``, the same default and keys), so a release ``mmle score`` has scored
embeds nothing again.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

import numpy as np

from harness.scoring.cache import input_key, model_key
from harness.scoring.data import Benchmark, Item, PoolInfo
from harness.scoring.metrics import outscores, per_query
from harness.mteb.video import MediaEncoder
from harness.report.tables import finite_json
from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.core.errors import UserError, report_error

MAIN_SCORE = "tie_aware_precision_at_1"
TIE_AWARE = {"p@1": "tie_aware_precision_at_1", "hit@5": "tie_aware_hit_rate_at_5",
             "ndcg@10": "tie_aware_ndcg_at_10", "mrr": "tie_aware_mrr"}


class PaperProtocolEncoder(MediaEncoder):
    """mteb's EncoderProtocol for a harness dense model: the harness's query formatting and
    middle truncation, unit vectors, cosine, through ``mmle score``'s embedding cache (``cache``:
    an ``EmbeddingCache``, the same keys; none: embed everything). ``truncated`` counts, per
    hf_subset, the queries and candidates that lost their middle; ``embedded`` the inputs run
    through the model and those the cache gave."""

    def __init__(self, model, cache=None):
        from harness.scoring.cache import EmbeddingCache
        from harness.models.adapters import DenseModel

        if not isinstance(model, DenseModel):
            raise UserError(f"{model.spec}: not an embedding model (mteb needs dense embeddings)")
        identity = model.identity()
        super().__init__(model.spec, str(identity.get("revision") or model_key(identity)[:12]))
        self.model = model
        self.cache = cache if cache is not None else EmbeddingCache(None)
        self.truncated: dict[str, dict[str, int]] = {}
        self.embedded: dict[str, dict[str, int]] = {}

    def _items(self, batch: dict, is_query: bool) -> list[Item]:
        """The harness's items for one mteb batch. mteb hands a query over with its instruction
        appended to ``text`` and keeps the original in ``query``, and a document with its title
        prepended to ``text`` and the original in ``body``: the raw parts are rebuilt from those."""
        texts = batch.get("query" if is_query else "body") or batch["text"]
        instructions = batch.get("instruction") if is_query else None
        items = []
        for i, text in enumerate(texts):
            if IMAGE_PLACEHOLDER in (text or ""):
                raise UserError("the mteb path scores text pools only (release_task selects them)")
            item = Item(id=str(i), text=text or "", instruction=(instructions[i] or "") if instructions else "",
                        is_query=is_query)
            items.append(self.model.format_query(item) if is_query else self.model.format_candidate(item))
        return items

    def encode(self, inputs, *, task_metadata=None, hf_split=None, hf_subset=None, prompt_type=None, **kwargs):
        from mteb.types import PromptType

        is_query = prompt_type == PromptType.query
        items = [item for batch in inputs for item in self._items(batch, is_query)]
        keys = [input_key(item) for item in items]
        first = {}
        for k, key in enumerate(keys):
            first.setdefault(key, k)
        # one vector per distinct input, as the harness's cache gives across its batches: a text
        # repeated in a pool is one embedding, not two that batch padding may tell apart
        unique = [items[k] for k in first.values()]
        if not unique:
            return np.zeros((0, 1), np.float32)
        from harness.models.adapters import PoolScores

        size = max(1, self.model.settings.batch_size)
        stats = PoolScores(scores=np.zeros((0, 0)))
        side = "queries" if is_query else "candidates"
        matrix, flags = self.model.embed_all((unique[start:start + size] for start in range(0, len(unique), size)),
                                             len(unique), self.cache, stats, f"{hf_subset} {side}")
        row_of = {key: j for j, key in enumerate(first)}
        counts = self.truncated.setdefault(str(hf_subset), {"queries": 0, "candidates": 0})
        counts[side] += sum(flags[row_of[key]] for key in keys)
        done = self.embedded.setdefault(str(hf_subset), {"embedded": 0, "cached": 0})
        done["embedded"] += stats.embedded
        done["cached"] += stats.cached
        return matrix[[row_of[key] for key in keys]]


def make_encoder(spec: str, settings=None, cache=None) -> PaperProtocolEncoder:
    """Any harness ``--model`` spec that embeds (``minilm``, ``st:<path>``, ``hf:<name>``, ...);
    ``cache``: an ``EmbeddingCache`` (``mmle score``'s, to reuse what it embedded)."""
    from harness.models.adapters import RunSettings, load_model

    settings = settings or RunSettings(progress=False)
    return PaperProtocolEncoder(load_model(spec, settings), cache)


def tie_aware_scores(qrels: dict[str, dict[str, int]], results: dict[str, dict[str, float]]) -> dict[str, float]:
    """The harness's metrics (``harness.scoring.metrics``: the expected value over the orders of the
    candidates tied with the positive) from mteb's retrieval results, plus how many queries had
    a tie. A positive missing from a query's results (past mteb's top_k) ranks below them all."""
    ranks, tied = [], 0
    for qid, relevant in qrels.items():
        positives = [cid for cid, score in relevant.items() if score > 0]
        if len(positives) != 1:
            raise UserError(f"query {qid!r} has {len(positives)} positives (the layout has exactly one)")
        scored = results.get(qid, {})
        if positives[0] not in scored:
            ranks.append((len(scored) + 1, len(scored) + 1))
            continue
        standing = outscores(list(scored.values()), scored[positives[0]])
        better = int((standing > 0).sum())
        ties = int((standing == 0).sum())  # includes the positive
        tied += ties > 1
        ranks.append((better + 1, better + ties))
    values = per_query(np.array(ranks, dtype=np.int64).reshape(-1, 2))
    return {**{name: float(values[metric].mean()) for metric, name in TIE_AWARE.items()}, "tied_positives": tied}


def _retrieval_base():
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    class MMLongEmbedRetrieval(AbsTaskRetrieval):
        """A release's pools, one hf_subset each, with the harness's tie-aware metrics added."""

        def task_specific_scores(self, scores, qrels, results, hf_split, hf_subset):  # noqa: ARG002
            return tie_aware_scores(qrels, results)

    return MMLongEmbedRetrieval


def text_pools(benchmark: Benchmark, patterns: list[str] | None = None) -> list[PoolInfo]:
    pools = benchmark.select(patterns) if patterns else benchmark.pools
    return [p for p in pools if p.modalities == {"text"}]


def task_name(dataset_path: str, name: str | None = None) -> str:
    """A release's mteb task name: ``MMLongEmbed`` and the release's folder name (out/hotpotqa ->
    MMLongEmbedHotpotqa), or ``name``; letters and digits only."""
    label = re.sub(r"[^A-Za-z0-9]+", "", name or dataset_path.rstrip("/").rsplit("/", 1)[-1].title()) or "Release"
    return f"MMLongEmbed{label}"


def release_task(dataset: str, pools: list[str] | None = None, name: str | None = None):
    """One mteb retrieval task over a release's text pools (``pools``: glob patterns, default
    all). ``dataset``: a local build or ``repo@revision``, as ``mmle score --dataset`` takes it."""
    from mteb.abstasks.task_metadata import TaskMetadata

    benchmark = Benchmark(dataset)
    chosen = text_pools(benchmark, pools)
    if not chosen:
        raise UserError(f"--dataset {dataset!r}: no text pool to score through mteb")
    left_out = [p.name for p in (benchmark.select(pools) if pools else benchmark.pools) if p not in chosen]
    metadata = TaskMetadata(
        name=task_name(benchmark.path, name), description=f"the text pools of {dataset}, scored by the paper's protocol",
        reference="https://github.com/mmlongembed/mmlongembed", type="Retrieval", category="t2t",
        modalities=["text"], dataset={"path": benchmark.path, "revision": benchmark.revision or "local"},
        eval_splits=["test"], eval_langs={p.name: ["eng-Latn"] for p in chosen}, main_score=MAIN_SCORE,
        date=("2025-01-01", "2025-12-31"), domains=[], task_subtypes=[], license="cc-by-4.0",
        annotations_creators="derived", dialect=[], sample_creation="created", bibtex_citation="")
    task_class = type(metadata.name, (_retrieval_base(),), {"metadata": metadata})
    task = task_class()
    task.left_out = left_out  # pools that need images or video: said, not dropped silently
    return task


def evaluate(model, task) -> dict[str, dict]:
    """{pool: mteb's scores for it} from ``mteb.evaluate`` (``model``: any mteb model)."""
    import mteb

    result = mteb.evaluate(model, task, cache=None, show_progress_bar=False)
    return {s["hf_subset"]: {k: v for k, v in s.items() if isinstance(v, (int, float))}
            for s in result.task_results[0].scores["test"]}


def plain_sentence_transformer(spec: str):
    """The model as a user who hands it to mteb directly has it (sentence-transformers' own
    encode: end truncation, mteb's query text)."""
    from sentence_transformers import SentenceTransformer

    from harness.models.adapters import minilm_path

    path = minilm_path() if spec == "minilm" else spec.partition(":")[2] if spec.startswith("st:") else ""
    if not path:
        raise UserError(f"--plain takes minilm or st:<path>, not {spec!r}")
    return SentenceTransformer(path, device="cpu", local_files_only=True)


TABLE_COLUMNS = (("mteb P@1", "precision_at_1"), ("P@1", MAIN_SCORE), ("nDCG@10", "tie_aware_ndcg_at_10"),
                 ("MRR", "tie_aware_mrr"), ("hit@5", "tie_aware_hit_rate_at_5"))


def scores_table(scores: dict[str, dict], encoder: PaperProtocolEncoder | None = None) -> str:
    """The figures per pool, x 100, as a table a reader scans: mteb's own P@1, the paper's
    tie-aware metrics, tied positives, and (with the harness's encoder) truncations and what
    was embedded or came from the cache."""
    from mmlongembed.checks.summary import format_table

    headers = ["pool", *(name for name, _ in TABLE_COLUMNS), "tied"]
    if encoder is not None:
        headers += ["truncated q/c", "embedded", "cached"]
    rows = []
    for pool, figures in scores.items():
        row = [pool, *(f"{100 * figures[key]:.1f}" for _, key in TABLE_COLUMNS), figures["tied_positives"]]
        if encoder is not None:
            cut, done = encoder.truncated.get(pool, {}), encoder.embedded.get(pool, {})
            row += [f"{cut.get('queries', 0)}/{cut.get('candidates', 0)}", done.get("embedded", 0),
                    done.get("cached", 0)]
        rows.append(row)
    return format_table(headers, rows)


def _parser() -> argparse.ArgumentParser:
    from harness.scoring.cache import add_cache_arguments

    parser = argparse.ArgumentParser(prog="python -m harness.mteb.retrieval",
                                     description="score a release's text pools through mteb.evaluate, by the "
                                                 "paper's protocol (the figures `mmle score` gives)")
    parser.add_argument("--dataset", required=True, help="a local build or repo@revision")
    parser.add_argument("--model", default="minilm", help="a harness model spec (minilm, st:<path>, hf:<name>, ...)")
    parser.add_argument("--pools", nargs="*", help="glob patterns of pool names (default: every text pool)")
    parser.add_argument("--instruction", help="query template with {instruction} and {text}, as for mmle score "
                                              "(default: the model's own)")
    parser.add_argument("--batch-size", type=int, default=16,
                        help="inputs per model call; memory is bounded by the batch, not the pool (default 16)")
    add_cache_arguments(parser)
    parser.add_argument("--plain", action="store_true",
                        help="the model through sentence-transformers' own encode (not the paper's protocol; "
                             "no cache)")
    parser.add_argument("--json", metavar="FILE", help="also write every figure mteb and the harness give, per "
                                                       "pool, to FILE as JSON (the machine-readable form)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars: only the table (and errors)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from harness.scoring.cache import EmbeddingCache, cache_directory
    from harness.models.adapters import RunSettings

    cache = EmbeddingCache(None if args.plain else cache_directory(args))
    encoder = None
    try:
        task = release_task(args.dataset, args.pools)
        if task.left_out:
            print(f"left out {len(task.left_out)} pools that need images or video (score them with mmle score): "
                  + ", ".join(task.left_out), file=sys.stderr)
        settings = RunSettings(progress=not args.quiet, instruction=args.instruction, batch_size=args.batch_size)
        if args.plain:
            model = plain_sentence_transformer(args.model)
        else:
            model = encoder = make_encoder(args.model, settings, cache)
        scores = evaluate(model, task)
    except UserError as exc:
        return report_error(exc)
    finally:
        cache.close()
    print(scores_table(scores, encoder))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(finite_json(scores), handle, indent=1, sort_keys=True, allow_nan=False)
            handle.write("\n")
        print(f"every figure per pool: {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
