"""The label-free shortcut audit: can a rule that never reads the query find the positive?

Each rule scores every candidate of a pool from what a model or an evaluator could see besides
the content's meaning: a column's value, the opaque id, the row position, the length, and
formatting features of the text (edge whitespace, the final character, blank-line and
double-space density...), and statistics of its words and sentences (``mmlongembed.ops.wordstats``:
the share of distinct words and of words used once, word and sentence lengths, capitalised words
and digits), which an edit that brings words the rest of the text never used would shift. Inside each query's group (its positive and the negatives made for
it), the rule "picks" its top candidate; ties count by expectation, as in the harness. A rule
that picks positives clearly more often than chance is a seam that gives the answer away, and
the build fails.

"Clearly" means a one-sided p-value below ``ALPHA`` and an effect of at least ``MIN_EXCESS``, so
that a tiny build (four queries) cannot fail by luck and a real seam (28 of 28 hard negatives
ending in a newline) cannot pass. A rule's hits are compared with a binomial of the mean chance
(conservative: the hits are a sum of Bernoullis of unequal chances, whose variance is smaller;
ties count by expectation, rounded down), exact even where chance is tiny (1/56 for a rule that
ranks a whole pool). Each rule is also read pairwise (how often it orders the positive above a
negative of its group, chance 1/2, normal approximation with the variance bound (k+2)/(12k) per
group of k negatives, from 20 groups up), which catches a seam that marks only some negatives
(one variant of three) once there are enough groups.

Two content-blind rules also look at the query itself, ranking the whole pool: the candidate
whose id shares the most character 3-grams with the query's id (an id derived from the query's,
`q:X` -> `d:X`), and the candidate whose row position matches the query's (corpus rows written in
query order). They apply to every pool, the needle grid included, where every candidate is the
positive of exactly one query and a query-blind rule scores exactly chance by construction.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Collection, Sequence

import numpy as np

from mmlongembed.core.documents import IMAGE_PLACEHOLDER
from mmlongembed.checks.summary import expected_p_at_1
from mmlongembed.ops.wordstats import FEATURES as WORD_FEATURES, text_features as word_features

ALPHA = 1e-6  # per rule: ~175 rules x ~300 pools (the needle grid) stay near 5% of a false alarm per build
MIN_EXCESS = 0.10  # and at least 10 points of P@1 above chance
MIN_PAIRWISE_GROUPS = 20
SUMMARY_ALPHA = 0.05  # a corrected p below it is "significant" in the summary (the audit fails at its own ALPHA)
MAX_CATEGORIES = 12  # indicator rules per categorical feature (its most common values)
NUMERIC_COLUMNS = ("n_tokens", "n_text_tokens", "n_image_tokens")
CATEGORICAL_COLUMNS = ("title",)
_LEADING_WHITESPACE = re.compile(r"\s*")  # \s is str.isspace, what lstrip strips


# A build reads most texts more than once: the lexical tier's levelling reads its pool before it is
# written, and the written pools' audit reads them again, the hard pool's variants (the lexical
# pool's too) among them. A text's features are kept by its digest (the features, not the text),
# the most recent ``FEATURES_KEPT``: bounded whatever the corpus (``mmle audit`` reads millions).
FEATURES_KEPT = 1 << 14
_features_by_digest: OrderedDict[bytes, dict[str, float]] = OrderedDict()


def _text_features(text: str) -> dict[str, float]:
    """``_features_of_text``, kept by the text's digest (read only: the same dict for one text)."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    features = _features_by_digest.get(digest)
    if features is None:
        features = _features_by_digest[digest] = _features_of_text(text)
        if len(_features_by_digest) > FEATURES_KEPT:
            _features_by_digest.popitem(last=False)
    else:
        _features_by_digest.move_to_end(digest)
    return features


def _features_of_text(text: str) -> dict[str, float]:
    if IMAGE_PLACEHOLDER in text:
        images, body = text.count(IMAGE_PLACEHOLDER), text.replace(IMAGE_PLACEHOLDER, "\x00")
    else:  # no copy of a long text for nothing
        images, body = 0, text
    n = len(body)
    chars = max(1, n)
    leading = _LEADING_WHITESPACE.match(body).end()
    trailing = 0
    while trailing < n - leading and body[n - 1 - trailing].isspace():
        trailing += 1
    if leading == n:  # all whitespace: lstrip and rstrip both take it all
        trailing = n
    newlines = body.count("\n")
    tabs = body.count("\t")
    return {**word_features(body),
        "chars": float(n),
        "images": float(images),
        "leading_whitespace": float(leading),
        "trailing_whitespace": float(trailing),
        "ends_with_newline": float(body.endswith("\n")),
        "blank_lines_per_1k_chars": 1000.0 * (body.count("\n\n") if newlines else 0) / chars,
        "newlines_per_1k_chars": 1000.0 * newlines / chars,
        "double_spaces_per_1k_chars": 1000.0 * body.count("  ") / chars,
        "tabs_per_1k_chars": 1000.0 * tabs / chars,
        # lines ending in a space or tab: one before each newline, and the last line
        "trailing_spaces_per_1k_lines": 1000.0 * ((body.count(" \n") if newlines else 0)
                                                  + (body.count("\t\n") if tabs and newlines else 0)
                                                  + body.endswith((" ", "\t"))) / (newlines + 1),
    }


ODD_ONE_OUT_FEATURES = ("chars", "images", *(f"column:{c}" for c in NUMERIC_COLUMNS))


def odd_one_out(features: dict[str, list[float]], groups: list | None) -> dict[str, list[float]]:
    """Per length feature (characters, images, each numeric column), each row's distance from the
    median of the rest of its group: read as "max", the candidate that lies farthest from its
    group. Distractors cut to one length target can all land on one figure and leave the positive
    alone (ActivityNet's easy negatives at 1,680 tokens around a positive of 1,620); no single
    value is the longest or shortest then, so "max"/"min" of the value itself miss it. Rows
    without a group (and groups of one) score 0."""
    if not groups:
        return {}
    members: dict = defaultdict(list)
    for i, group in enumerate(groups):
        if group is not None and group != "":
            members[group].append(i)
    out = {}
    for name in ODD_ONE_OUT_FEATURES:
        values = features.get(name)
        if values is None:
            continue
        distance = [0.0] * len(values)
        for rows in members.values():
            if len(rows) < 2:
                continue
            ordered = sorted(rows, key=values.__getitem__)  # once per group: the rest's median by index
            for position, i in enumerate(ordered):
                def rest(t: int) -> float:  # the t-th smallest of the group without row i
                    return values[ordered[t if t < position else t + 1]]
                k = len(rows) - 1
                median = rest(k // 2) if k % 2 else (rest(k // 2 - 1) + rest(k // 2)) / 2
                distance[i] = abs(values[i] - median)
        out[f"distance from its group's median {name}"] = distance
    return out


def _final_character(text: str) -> str:
    return repr(text[-1:]) if text else "''"


def rule_scores(corpus: dict[str, list]) -> dict[str, list[float]]:
    """rule -> one score per corpus row (the rule picks the highest). Reads model-visible columns
    and the row order only."""
    features, categorical = row_features(corpus)
    return rules_from_features(features, categorical, corpus["_id"], corpus.get("group"))


def row_features(corpus: dict[str, list]) -> tuple[dict[str, list[float]], dict[str, list[str]]]:
    """(numeric features, categorical features) of each row, from that row alone: so a corpus too
    large to hold can be read in batches (``harness.audit``) and its features joined afterwards."""
    features: dict[str, list[float]] = defaultdict(list)
    for text in corpus["text"]:
        for name, value in _text_features(text or "").items():
            features[name].append(value)
    for column in NUMERIC_COLUMNS:
        if column in corpus:
            features[f"column:{column}"] = [float(v or 0) for v in corpus[column]]
    categorical = {"final character": [_final_character(t or "") for t in corpus["text"]]}
    for column in CATEGORICAL_COLUMNS:
        if column in corpus:
            categorical[f"column:{column}"] = [str(v) for v in corpus[column]]
    return dict(features), categorical


def order_features(ids: list[str]) -> dict[str, list[float]]:
    """Where a row sorts by its id, and where it was written: what an evaluator's tie-break (by id)
    or a reader's first-come choice sees."""
    id_rank = {cid: k for k, cid in enumerate(sorted(ids))}
    return {"id_order": [float(id_rank[cid]) for cid in ids], "row_order": [float(i) for i in range(len(ids))]}


def categorical_rules(categorical: dict[str, list[str]]) -> dict[str, list[float]]:
    """One indicator rule per common value of each categorical feature ("final character == '\\n'")."""
    rules = {}
    for name, values in categorical.items():
        for value, _ in Counter(values).most_common(MAX_CATEGORIES):
            rules[f"{name} == {value}"] = [float(v == value) for v in values]
    return rules


def rules_from_features(features: dict[str, list[float]], categorical: dict[str, list[str]], ids: list[str] | None,
                        groups: list | None = None) -> dict[str, list[float]]:
    """Every rule over rows whose features ``row_features`` gave: each feature read as "max" and
    "min", the odd one out inside ``groups``, id and row order (``ids`` None: rows not yet given
    their written ids and order, as a builder holds them), and the categorical indicators."""
    features = {**features, **odd_one_out(features, groups), **(order_features(ids) if ids is not None else {})}
    rules = {}
    for name, values in features.items():
        rules[f"max {name}"] = values
        rules[f"min {name}"] = [-v for v in values]
    rules.update(categorical_rules(categorical))
    return rules


def _groups(corpus: dict[str, list], qrels: dict[str, list]) -> list[tuple[list[int], int]]:
    """(row indices of a query's group, position of its positive in it), for groups of 2+."""
    positive_of = {q: c for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]) if s > 0}
    members: dict[str, list[int]] = defaultdict(list)
    for i, group in enumerate(corpus.get("group") or []):
        members[group].append(i)
    index_of = {cid: i for i, cid in enumerate(corpus["_id"])}
    groups = []
    for query, positive in positive_of.items():
        rows = members.get(query, [])
        if positive in index_of and index_of[positive] in rows and len(rows) > 1:
            groups.append((rows, rows.index(index_of[positive])))
    return groups


def rule_p_at_1(corpus: dict[str, list], qrels: dict[str, list],
                rules: dict[str, list[float]] | None = None) -> dict[str, float]:
    """Every query-blind rule's P@1 inside the queries' groups (see the module docstring);
    ``rules``: ``rule_scores(corpus)`` when already computed."""
    groups = _groups(corpus, qrels)
    if not groups:
        return {}
    return {rule: sum(expected_p_at_1([scores[i] for i in rows], k) for rows, k in groups) / len(groups)
            for rule, scores in (rules if rules is not None else rule_scores(corpus)).items()}


def _pairwise_share(scores: list[float], positive: int) -> float:
    """The share of the group's negatives the rule puts below the positive (ties count half)."""
    mine = scores[positive]
    others = [s for i, s in enumerate(scores) if i != positive]
    return sum(1.0 if mine > s else 0.5 if mine == s else 0.0 for s in others) / len(others)


def _pairwise_verdicts(rules: dict[str, list[float]], groups: list[tuple[list[int], int]]) -> list[dict]:
    """Each rule as a pairwise test: how often it orders the positive above a negative of its
    group (see the module docstring)."""
    if len(groups) < MIN_PAIRWISE_GROUPS:
        return []
    variances = [_pairwise_variance(len(rows)) for rows, _ in groups]
    return [pairwise_verdict(rule, sum(_pairwise_share([scores[i] for i in rows], k) for rows, k in groups), variances)
            for rule, scores in rules.items() if rule.startswith("max ")]  # "min X" pairwise mirrors "max X"


def _pairwise_variance(group_size: int) -> float:
    """The bound on the variance of a group's pairwise share under chance (the module docstring)."""
    return (group_size + 1) / (12 * (group_size - 1))


def pairwise_verdict(rule: str, shares: float, variances: Sequence[float]) -> dict:
    """A "max" rule read pairwise: ``shares``, the sum over groups of ``_pairwise_share``, against
    chance (1/2 per group, ``variances`` its bound per group); read as "min" where below chance."""
    share = shares / len(variances)
    if share < 0.5:
        rule, share = "min " + rule[len("max "):], 1.0 - share
    z = (share - 0.5) * len(variances) / math.sqrt(sum(variances))
    return {"rule": f"{rule} (pairwise)", "n": len(variances), "p_at_1": share, "chance": 0.5, "z": z,
            "p_value": 0.5 * math.erfc(z / math.sqrt(2))}


def binomial_tail(n: int, p: float, k: int) -> float:
    """P(X >= k) for X ~ Binomial(n, p), exact (log space)."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q
             for i in range(k, n + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def _ngrams(text: str, n: int = 3) -> set[str]:
    return {text[i:i + n] for i in range(max(1, len(text) - n + 1))}


def pool_rule_scores(corpus: dict[str, list], queries: dict[str, list]) -> dict[str, list[list[float]]]:
    """Content-blind rules that also look at the query's own id or row position: rule -> for
    each query (in written order) a score per corpus row. They catch an id derived from the
    query's id (`q:X` -> `d:X`) and corpus rows written in query order (the positive of the
    k-th query at row k, or at row 4k in groups of four)."""
    n_queries, n_rows = len(queries["_id"]), len(corpus["_id"])
    if not n_queries or not n_rows:
        return {}
    stride = n_rows / n_queries
    rows_with: dict[str, list[int]] = defaultdict(list)  # 3-gram -> the rows whose id has it
    for j, cid in enumerate(corpus["_id"]):
        for gram in _ngrams(cid):
            rows_with[gram].append(j)

    def shared_grams(qid: str) -> list[float]:
        shared = [0.0] * n_rows
        for gram in _ngrams(qid):
            for j in rows_with.get(gram, ()):
                shared[j] += 1.0
        return shared

    return {
        "row aligned with the query's row": [[-abs(j - i * stride) for j in range(n_rows)] for i in range(n_queries)],
        "id shares most 3-grams with the query's id": [shared_grams(qid) for qid in queries["_id"]],
    }


def p_at_1_verdict(rule: str, hits: float, chances: list[float]) -> dict:
    """A P@1 rule: its hits against a binomial of the mean chance (see the module docstring)."""
    n, expected = len(chances), sum(chances)
    spread = math.sqrt(sum(c * (1 - c) for c in chances)) or 1.0
    return {"rule": rule, "n": n, "p_at_1": hits / n, "chance": expected / n, "z": (hits - expected) / spread,
            "p_value": binomial_tail(n, expected / n, math.floor(hits + 1e-9))}


def audit_pool(corpus: dict[str, list], qrels: dict[str, list], queries: dict[str, list] | None = None,
               design_signals: Collection[str] = ()) -> dict:
    """Run every rule. ``corpus`` (and ``queries``) hold the model columns in written order plus,
    for the corpus, the audit's ``group`` column; the positives come from ``qrels``. Group rules
    pick inside each query's group; pool rules rank the whole pool for each query. A rule on one
    of the ``design_signals`` (word statistics the paper's design moves, ``Builder.design_signals``)
    that would fail is listed under ``design_signals`` and does not fail the pool."""
    results = []
    groups = _groups(corpus, qrels)
    if groups:
        chances = [1 / len(rows) for rows, _ in groups]
        rules = rule_scores(corpus)
        results += [p_at_1_verdict(rule, p * len(groups), chances) for rule, p in rule_p_at_1(corpus, qrels, rules).items()]
        results += _pairwise_verdicts(rules, groups)
    positive_of = {q: c for q, c, s in zip(qrels["query-id"], qrels["corpus-id"], qrels["score"]) if s > 0}
    index_of = {cid: i for i, cid in enumerate(corpus["_id"])}
    if queries is not None:
        scored = [(i, index_of[positive_of[qid]]) for i, qid in enumerate(queries["_id"])
                  if positive_of.get(qid) in index_of]
        if scored:
            chances = [1 / len(corpus["_id"])] * len(scored)
            for rule, table in pool_rule_scores(corpus, queries).items():
                hits = sum(expected_p_at_1(table[i], positive) for i, positive in scored)
                results.append(p_at_1_verdict(rule, hits, chances))
    if not results:
        return {"applicable": False, "groups": 0, "passed": True,
                "reason": "every candidate is the positive of one query: a query-blind rule scores exactly chance"}
    results.sort(key=lambda r: (r["p_value"], -r["z"], r["rule"]))
    worst = results[0]
    beyond = [r for r in results if r["p_value"] < ALPHA and r["p_at_1"] - r["chance"] >= MIN_EXCESS]
    by_design = [r for r in beyond if _feature(r["rule"]) in design_signals]
    failing = [r for r in beyond if r not in by_design]
    return {
        "applicable": True, "groups": len(groups), "rules": len(results), "chance": round(worst["chance"], 4),
        "worst_rule": worst["rule"], "worst_n": worst["n"], "worst_p_at_1": round(worst["p_at_1"], 4),
        "worst_z": round(worst["z"], 2),
        "worst_p_value": float(f"{worst['p_value']:.3g}"), "passed": not failing,
        "failing": [_rounded(r) for r in failing], "word_statistics": word_statistics(results),
        **({"design_signals": [_rounded(r) for r in by_design]} if design_signals else {}),
    }


def word_statistics(results: list[dict]) -> dict[str, dict]:
    """Per word and sentence statistic (``mmlongembed.ops.wordstats``), its closest reading to a
    shortcut (the highest or lowest value in the group, or either read pairwise): the one with
    the smallest p-value (``results`` sorted so)."""
    out: dict[str, dict] = {}
    for r in results:
        feature = _feature(r["rule"])
        if feature in WORD_FEATURES and feature not in out:
            out[feature] = _rounded(r)
    return {feature: out[feature] for feature in WORD_FEATURES if feature in out}


def _feature(rule: str) -> str:
    """The feature a "max"/"min" rule reads ("min type_token_ratio (pairwise)" -> type_token_ratio)."""
    return rule.split(" ", 1)[1].removesuffix(" (pairwise)") if rule[:4] in ("max ", "min ") else ""


def _rounded(r: dict) -> dict:
    return {"rule": r["rule"], "p_at_1": round(r["p_at_1"], 4), "chance": round(r["chance"], 4), "z": round(r["z"], 2),
            "p_value": float(f"{r['p_value']:.3g}")}


def level_groups(rules: dict[str, list[float]], groups: list[tuple[list[int], int]], rng, alpha: float) -> list[bool]:
    """Which of ``groups`` (``_groups``' (rows, the positive's place)) to keep so that no rule of
    ``rules`` (``rule_scores``') reads the positives above chance, in P@1 or pairwise as
    ``audit_pool`` reads them: the smallest p-value times the number of readings (Bonferroni, as
    the build summary corrects it) at least ``alpha``. While one reads beyond that, a group it
    reads most strongly leaves (drawn among equals; ``rng``, a numpy Generator), and the readings
    are taken again: the fewest groups leave that the greedy order finds.

    This is adversarial filtering of a tier's queries against the audit's own rules (as AFLite
    filters a dataset against simple models): a builder edits its candidates to keep their
    statistics level, and this takes out the groups where, over the whole pool, it fell short."""
    names = list(rules)
    hits = np.array([[expected_p_at_1([rules[r][i] for i in rows], k) for rows, k in groups] for r in names]
                    ).reshape(len(names), len(groups))
    paired = [r for r in names if r.startswith("max ")]
    shares = np.array([[_pairwise_share([rules[r][i] for i in rows], k) for rows, k in groups] for r in paired]
                      ).reshape(len(paired), len(groups))
    chances = [1 / len(rows) for rows, _ in groups]
    variances = [_pairwise_variance(len(rows)) for rows, _ in groups]
    readings = len(names) + len(paired)
    keep = np.ones(len(groups), dtype=bool)
    while keep.any() and names:
        kept = np.flatnonzero(keep)
        hit_sums = hits[:, kept].sum(axis=1)
        r = int(np.argmax(hit_sums))
        worst = p_at_1_verdict(names[r], float(hit_sums[r]), [chances[g] for g in kept])
        strength = hits[r]
        if len(kept) >= MIN_PAIRWISE_GROUPS and paired:
            share_sums = shares[:, kept].sum(axis=1)
            p = int(np.argmax(np.abs(share_sums - len(kept) / 2)))
            pairwise = pairwise_verdict(paired[p], float(share_sums[p]), [variances[g] for g in kept])
            if pairwise["p_value"] < worst["p_value"]:
                worst = pairwise
                strength = shares[p] if share_sums[p] >= len(kept) / 2 else 1.0 - shares[p]
        if worst["p_value"] * readings >= alpha:
            break
        strongest = kept[strength[kept] == strength[kept].max()]
        keep[int(strongest[rng.integers(len(strongest))])] = False
    return keep.tolist()
