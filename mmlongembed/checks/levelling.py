"""A lexical tier's pool levelled against what reads it (``level_the_pool``): the label-free
audit's query-blind rules, and BM25's top. Here, beside the audit, because it reads the pool
with the audit's own rules and their significance (``checks.shortcuts.level_groups``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from mmlongembed.checks.shortcuts import SUMMARY_ALPHA, level_groups, row_features, rules_from_features
from mmlongembed.core.pools import Candidate, Pool, Query
from mmlongembed.checks.summary import document_words
from mmlongembed.ops.bm25 import bm25_tokenize
from mmlongembed.ops.lexical import level_the_top
from mmlongembed.ops.query_weight import ranks_in_pool


def level_the_pool(pool: Pool, rng: np.random.Generator, top: bool = True,
                   rounds: int = 3) -> tuple[Pool, list[Query], list[Query]]:
    """``pool`` (a lexical tier's: each query's group is its positive and its variants) less the
    queries that must leave for it to stand level; and the queries that left for each of the two
    reasons (query-blind rules, BM25's top):

    - no query-blind rule of the label-free audit finds the positives above chance over the pool
      (``checks.shortcuts.level_groups``, at the build summary's significance): the builder
      keeps each variant's statistics near its positive's, but over a hundred groups a statistic
      it could not keep level (a subject's long words in the donor blocks that hold the query's
      words) adds up to a rule that finds the positive;
    - with ``top``, the positive tops its group under BM25 over the pool itself
      (``ranks_in_pool``) in exactly one group in (the group's size), so that BM25's P@1 among
      the group is chance. The sides or ranks a builder made its groups on are those of an IDF
      that stands in for the pool's, which is not made yet; in the pool, where the variants
      carry the query's words, those weigh less, and the positive tops its group more often
      than it was dealt to.

    Leaving moves the IDF and the rules' readings a little, so both are read again, ``rounds``
    times at most (the top is read last)."""
    positive_of = {query_id: candidate_id for query_id, candidate_id, _ in pool.qrels}
    by_id = {candidate.id: candidate for candidate in pool.candidates}
    members: dict[str, list[Candidate]] = {}
    for candidate in pool.candidates:
        members.setdefault(candidate.group, []).append(candidate)
    groups = []  # per query: its positive, then the rest of its group
    for query in pool.queries:
        positive = by_id[positive_of[query.id]]
        groups.append([positive, *(c for c in members[positive.group] if c.id != positive.id)])
    rows = [c.corpus_row() for group in groups for c in group]
    corpus = {column: [row[column] for row in rows] for column in ("title", "text", "n_tokens", "n_text_tokens",
                                                                   "n_image_tokens")}
    corpus["group"] = [c.group for group in groups for c in group]
    features, categorical = row_features(corpus)
    # no id or row-order rules: the writer makes the ids opaque and draws the rows' order
    rules = rules_from_features(features, categorical, None, corpus["group"])
    starts = np.cumsum([0] + [len(group) for group in groups])
    # the variants are most of their positive's text: each line is tokenised once (``document_words``)
    lines: dict[str, list[str]] = {}
    words = [[document_words(c.document, lines) for c in group] for group in groups] if top else []
    queries = [bm25_tokenize(query.text) for query in pool.queries] if top else []
    kept, for_rules, for_top = list(range(len(groups))), [], []
    for _ in range(rounds):
        keep = level_groups(rules, [(list(range(starts[i], starts[i + 1])), 0) for i in kept], rng, SUMMARY_ALPHA)
        for_rules += [i for i, k in zip(kept, keep) if not k]
        kept = [i for i, k in zip(kept, keep) if k]
        if not top or not kept or any(len(groups[i]) != len(groups[kept[0]]) for i in kept):
            break  # groups of several sizes: no one share of tops levels them
        tops = [rank == 0 for rank in ranks_in_pool([queries[i] for i in kept], [words[i] for i in kept])]
        if sum(tops) * len(groups[kept[0]]) == len(kept):
            break
        keep = level_the_top(tops, len(groups[kept[0]]), rng)
        for_top += [i for i, k in zip(kept, keep) if not k]
        kept = [i for i, k in zip(kept, keep) if k]
    levelled = replace(pool, queries=[], candidates=[], qrels=[])
    for i in sorted(kept):
        levelled.add_query(pool.queries[i], groups[i][0], groups[i][1:])
    return levelled, [pool.queries[i] for i in sorted(for_rules)], [pool.queries[i] for i in sorted(for_top)]
