"""The label-free battery on one split of a retrieval dataset, and its statistics.

The rules are the build audit's (``mmlongembed.checks.shortcuts``): every per-row feature
(``row_features``: length in characters and images, formatting, word statistics, numeric length
columns) read as "max" and "min", id and row order, the final character, and the odd one out
where each candidate belongs to one query's list. Here a corpus is read in batches: each batch's
rows become their features (floats) and are dropped, so memory holds ids and features, never texts.
Lengths in tokens are the ``length`` diagnostic's (``harness.models.diagnostics.yardstick_length``):
a dataset without an ``n_tokens`` column gets it from there.

Two readings, by what the dataset gives:

- per-query candidate lists (mteb's ``top_ranked``, a release's groups): each rule picks inside
  each list; P@1 and nDCG@10 are expectations over random tie orders (each position of a tied
  block holds a relevant document with probability r/m), against chance (the same with every
  score equal). The test: hits against a binomial of the mean chance (``p_at_1_verdict``).
- the whole corpus: a query-blind rule ranks every query's corpus alike, so it cannot rank per
  query; it can still tell judged documents from the rest. Its AUC (ties count half), and a
  two-sided permutation p-value: the judged labels dealt anew to the rows, seeded, ``(1 + more
  extreme) / (1 + permutations)``.

BM25 (``mmlongembed.ops.bm25``) and the ``random`` and ``length`` diagnostics are scored per query
as baselines: a lexical match to the query is what retrieval is, not a leak.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.audit.sources import AuditSplit
from mmlongembed.checks.shortcuts import (MIN_EXCESS, categorical_rules, order_features, p_at_1_verdict,
                                          row_features, rules_from_features)
from mmlongembed.core.documents import IMAGE_PLACEHOLDER

NDCG_DEPTH = 10
BASELINES = ("bm25", "length", "random")


@dataclass
class CorpusFeatures:
    """What one pass over a corpus keeps: ids, one float per row and feature, the final
    character, and what the baselines need (a BM25 index, random-encoder vectors)."""

    ids: list[str]
    features: dict[str, np.ndarray]
    categorical: dict[str, list[str]]
    batches: int
    bm25: object | None = None
    random_vectors: np.ndarray | None = None
    index_of: dict[str, int] = field(default_factory=dict)


def read_corpus(split: AuditSplit, batch_size: int, baselines: bool = True) -> CorpusFeatures:
    """One pass over ``split``'s corpus, ``batch_size`` rows at a time (see the module docstring)."""
    import sys

    from harness.models.diagnostics import RandomModel, yardstick_length
    from harness.models.adapters import RunSettings
    from harness.scoring.data import Item
    from mmlongembed.core.tokens import default_counter
    from mmlongembed.ops.bm25 import BM25Index, bm25_tokenize

    counter = default_counter()
    random_model = RandomModel(RunSettings(progress=False)) if baselines else None
    ids: list[str] = []
    chunks: dict[str, list[np.ndarray]] = {}
    categorical: dict[str, list[str]] = {}
    vectors: list[np.ndarray] = []
    batches = 0

    def words_of_each_row():
        nonlocal batches
        for batch in split.corpus_batches(batch_size):
            batches += 1
            items = [Item(id=cid, text=text, images=tuple(images))
                     for cid, text, images in zip(batch["_id"], batch["text"], batch["images"])]
            if "n_tokens" not in batch:  # the length diagnostic's yardstick: text tokens plus image tokens
                batch["n_tokens"] = [yardstick_length(item, counter) for item in items]
            features, finals = row_features(batch)
            # images beside the text (an mteb image column) have no placeholder in it
            features["images"] = [float(max(text.count(IMAGE_PLACEHOLDER), len(images)))
                                  for text, images in zip(batch["text"], batch["images"])]
            for name, values in features.items():
                chunks.setdefault(name, []).append(np.asarray(values, dtype=np.float64))
            for name, values in finals.items():
                categorical.setdefault(name, []).extend(sys.intern(v) for v in values)
            ids.extend(batch["_id"])
            if random_model is not None:
                vectors.append(random_model.embed(items)[0])
            for title, text in zip(batch["title"], batch["text"]):
                yield bm25_tokenize(f"{title} {text}".replace(IMAGE_PLACEHOLDER, " "))

    if baselines:
        index = BM25Index(words_of_each_row())
    else:
        index = None
        for _ in words_of_each_row():
            pass
    if not ids:
        from mmlongembed.core.errors import UserError

        raise UserError(f"split {split.name}: the corpus has no rows")
    features = {name: np.concatenate(parts) for name, parts in chunks.items()}
    categorical.pop("column:title", None)  # a title is a document's own words, not a category
    return CorpusFeatures(ids, features, categorical, batches, index,
                          np.concatenate(vectors) if vectors else None, {cid: i for i, cid in enumerate(ids)})


def expected_top(scores: np.ndarray, relevant: np.ndarray, depth: int = NDCG_DEPTH) -> tuple[float, float]:
    """(P@1, nDCG@depth) of one ranking, each its expectation over random orders of tied scores:
    a tied block of m documents holding r relevant ones puts a relevant one at each of its
    positions with probability r/m."""
    n, total_relevant = len(scores), int(relevant.sum())
    if not n or not total_relevant:
        return 0.0, 0.0
    k = min(depth, n)
    kth = np.partition(scores, n - k)[n - k]  # the k-th highest score
    contenders = np.flatnonzero(scores >= kth)
    values = scores[contenders]
    distinct = np.unique(values)[::-1]
    gains, position = [], 0
    for value in distinct:
        block = contenders[values == value]
        share = float(relevant[block].sum()) / len(block)
        take = min(len(block), k - position)
        gains += [share] * take
        position += take
        if position >= k:
            break
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = discounts[:min(total_relevant, k)].sum()
    return gains[0], float(np.dot(gains, discounts[:len(gains)]) / ideal)


def chance_top(n: int, total_relevant: int, depth: int = NDCG_DEPTH) -> tuple[float, float]:
    """``expected_top`` with every score equal: what a rule that sees nothing gets."""
    return expected_top(np.zeros(n), np.arange(n) < total_relevant, depth)


@dataclass
class Lists:
    """Per query: the rows of its candidate list and which of them are relevant."""

    queries: list[str]
    rows: list[np.ndarray]
    relevant: list[np.ndarray]


def candidate_lists(split: AuditSplit, corpus: CorpusFeatures) -> Lists:
    """The split's queries that can be scored in their lists: a relevant document and another
    candidate present in the corpus."""
    lists = Lists([], [], [])
    for qid, judged in split.relevant.items():
        listed = split.candidates.get(qid, []) if split.candidates is not None else []
        rows = np.array([corpus.index_of[c] for c in dict.fromkeys(listed) if c in corpus.index_of], dtype=np.int64)
        relevant = np.array([corpus.ids[r] in judged for r in rows], dtype=bool)
        if len(rows) >= 2 and relevant.any():
            lists.queries.append(qid)
            lists.rows.append(rows)
            lists.relevant.append(relevant)
    return lists


def row_groups(lists: Lists, n_rows: int) -> list[str] | None:
    """Each row's query where every listed row belongs to one list (a release's groups, disjoint
    top_ranked lists): the odd one out reads groups; None where lists overlap."""
    group = [""] * n_rows
    for qid, rows in zip(lists.queries, lists.rows):
        for r in rows:
            if group[r]:
                return None
            group[r] = qid
    return group


def score_lists(name: str, scores_of, lists: Lists) -> dict:
    """One rule or baseline over per-query lists: P@1 and nDCG@10 against chance, with the exact
    binomial p-value of its hits (``scores_of(i)``: the scores of query i's list)."""
    p1, ndcg, chance_p1, chance_ndcg = [], [], [], []
    for i, (rows, relevant) in enumerate(zip(lists.rows, lists.relevant)):
        got = expected_top(np.asarray(scores_of(i), dtype=np.float64), relevant)
        base = chance_top(len(rows), int(relevant.sum()))
        p1.append(got[0]), ndcg.append(got[1]), chance_p1.append(base[0]), chance_ndcg.append(base[1])
    verdict = p_at_1_verdict(name, sum(p1), chance_p1)
    return {"rule": name, "n": len(p1), "p_at_1": float(np.mean(p1)), "chance_p_at_1": float(np.mean(chance_p1)),
            "ndcg_at_10": float(np.mean(ndcg)), "chance_ndcg_at_10": float(np.mean(chance_ndcg)),
            "excess": float(np.mean(p1) - np.mean(chance_p1)), "p_value": verdict["p_value"]}


def list_rules(corpus: CorpusFeatures, lists: Lists) -> list[dict]:
    """Every query-blind rule, picking inside each query's list."""
    rules = rules_from_features(corpus.features, corpus.categorical, corpus.ids, row_groups(lists, len(corpus.ids)))
    out = []
    for name, values in rules.items():
        values = np.asarray(values, dtype=np.float64)
        out.append(score_lists(name, lambda i, v=values: v[lists.rows[i]], lists))
    return out


def _ranks(values: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(values)  # ties get their mean rank: a tie counts half in the AUC


def corpus_rules(corpus: CorpusFeatures, judged: np.ndarray, permutations: int, seed: int) -> list[dict]:
    """Every query-blind feature's AUC separating the judged rows from the rest, read in the
    direction it separates them ("max X" above 0.5, else "min X"), with a two-sided permutation
    p-value; the same permutations for every rule."""
    readings = {**{f"max {k}": v for k, v in corpus.features.items()},
                **{f"max {k}": np.asarray(v) for k, v in order_features(corpus.ids).items()},
                **{k: np.asarray(v) for k, v in categorical_rules(corpus.categorical).items()}}
    n, positives = len(judged), int(judged.sum())
    if positives == 0 or positives == n:
        return []
    ranks = {name: _ranks(values) for name, values in readings.items()}
    offset, pairs = positives * (positives + 1) / 2, positives * (n - positives)
    observed = {name: (r[judged].sum() - offset) / pairs for name, r in ranks.items()}
    beyond = dict.fromkeys(ranks, 0)
    rng = np.random.default_rng(seed)
    for start in range(0, permutations, 256):
        draws = np.stack([rng.choice(n, positives, replace=False) for _ in range(min(256, permutations - start))])
        for name, r in ranks.items():
            permuted = (r[draws].sum(axis=1) - offset) / pairs
            beyond[name] += int((np.abs(permuted - 0.5) >= abs(observed[name] - 0.5) - 1e-12).sum())
    out = []
    for name, auc in observed.items():
        if auc < 0.5 and name.startswith("max "):
            name, auc = "min " + name[len("max "):], 1.0 - auc
        out.append({"rule": name, "n": n, "judged": positives, "auc": float(auc), "chance_auc": 0.5,
                    "excess": float(abs(auc - 0.5)) if name[:4] in ("max ", "min ") else float(auc - 0.5),
                    "p_value": (1 + beyond[name.replace("min ", "max ", 1)]) / (1 + permutations)})
    return out


def baselines(split: AuditSplit, corpus: CorpusFeatures, lists: Lists | None) -> list[dict]:
    """BM25, ``length`` and ``random`` per query, over its list or the whole corpus."""
    from harness.models.adapters import RunSettings
    from harness.models.diagnostics import RandomModel
    from harness.scoring.data import Item
    from mmlongembed.ops.bm25 import bm25_tokenize

    if lists is None:  # every query ranks the whole corpus
        lists = Lists([], [], [])
        everything = np.arange(len(corpus.ids))
        for qid, judged in split.relevant.items():
            relevant = np.zeros(len(corpus.ids), dtype=bool)
            relevant[[corpus.index_of[c] for c in judged if c in corpus.index_of]] = True
            if relevant.any():
                lists.queries.append(qid), lists.rows.append(everything), lists.relevant.append(relevant)
    if not lists.queries:
        return []
    random_model = RandomModel(RunSettings(progress=False))
    query_vectors = random_model.embed([Item(id=q, text=split.queries.get(q, ""), is_query=True)
                                        for q in lists.queries])[0]
    tokens = corpus.features["column:n_tokens"]
    return [
        score_lists("bm25", lambda i: corpus.bm25.scores(bm25_tokenize(split.queries.get(lists.queries[i], "")))[
            lists.rows[i]], lists),
        score_lists("length (diagnostic)", lambda i: tokens[lists.rows[i]], lists),
        score_lists("random (diagnostic)", lambda i: corpus.random_vectors[lists.rows[i]] @ query_vectors[i], lists),
    ]


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down correction: each p-value multiplied by the number of tests not yet
    passed below it, kept monotone, capped at 1."""
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    corrected, running = [1.0] * len(p_values), 0.0
    for step, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - step) * p_values[i]))
        corrected[i] = running
    return corrected


def flags(result: dict, alpha: float) -> bool:
    """A rule finds the positives: its corrected p below ``alpha`` and an effect of at least
    ``MIN_EXCESS`` (10 points of P@1, or an AUC 0.10 from one half)."""
    return result["corrected_p"] < alpha and result["excess"] >= MIN_EXCESS - 1e-12
