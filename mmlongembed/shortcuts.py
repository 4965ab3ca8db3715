"""The label-free shortcut audit: can a rule that never reads the query find the positive?

Each rule scores every candidate of a pool from what a model or an evaluator could see besides
the content's meaning: a column's value, the opaque id, the row position, the length, and
formatting features of the text (edge whitespace, the final character, blank-line and
double-space density...). Inside each query's group (its positive and the negatives made for
it), the rule "picks" its top candidate; ties count by expectation, as in the harness. A rule
that picks positives clearly more often than chance is a seam that gives the answer away, and
the build fails.

"Clearly" is a one-sided z-test against the chance hits under the null, Var = sum c(1-c),
with a floor on the effect, so that a tiny build (four queries) cannot fail by luck and a real
seam (28 of 28 hard negatives ending in a newline) cannot pass.

Where every candidate is the positive of exactly one query (the needle grid), a query-blind
rule picks the same candidate for every query, so it scores exactly chance by construction; the
audit says so and passes.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from mmlongembed.documents import IMAGE_PLACEHOLDER
from mmlongembed.report import expected_p_at_1

Z_FAIL = 4.0  # one-sided p ~ 3e-5 per rule: with ~50 rules, ~1e-3 per pool by luck
MIN_EXCESS = 0.10  # and at least 10 points of P@1 above chance
MAX_CATEGORIES = 12  # indicator rules per categorical feature (its most common values)
NUMERIC_COLUMNS = ("n_tokens", "n_text_tokens", "n_image_tokens")
CATEGORICAL_COLUMNS = ("title",)


def _text_features(text: str) -> dict[str, float]:
    body = text.replace(IMAGE_PLACEHOLDER, "\x00")
    chars = max(1, len(body))
    stripped_left, stripped_right = body.lstrip(), body.rstrip()
    return {
        "chars": float(len(body)),
        "images": float(text.count(IMAGE_PLACEHOLDER)),
        "leading_whitespace": float(len(body) - len(stripped_left)),
        "trailing_whitespace": float(len(body) - len(stripped_right)),
        "ends_with_newline": float(body.endswith("\n")),
        "blank_lines_per_1k_chars": 1000.0 * body.count("\n\n") / chars,
        "newlines_per_1k_chars": 1000.0 * body.count("\n") / chars,
        "double_spaces_per_1k_chars": 1000.0 * body.count("  ") / chars,
        "tabs_per_1k_chars": 1000.0 * body.count("\t") / chars,
        "trailing_spaces_per_1k_lines": 1000.0 * sum(1 for line in body.split("\n") if line != line.rstrip(" \t"))
        / (body.count("\n") + 1),
    }


def _final_character(text: str) -> str:
    return repr(text[-1:]) if text else "''"


def rule_scores(corpus: dict[str, list]) -> dict[str, list[float]]:
    """rule -> one score per corpus row (the rule picks the highest). Reads model-visible columns
    and the row order only."""
    n = len(corpus["_id"])
    features: dict[str, list[float]] = defaultdict(list)
    for text in corpus["text"]:
        for name, value in _text_features(text or "").items():
            features[name].append(value)
    for column in NUMERIC_COLUMNS:
        if column in corpus:
            features[f"column:{column}"] = [float(v or 0) for v in corpus[column]]
    id_rank = {cid: k for k, cid in enumerate(sorted(corpus["_id"]))}
    features["id_order"] = [float(id_rank[cid]) for cid in corpus["_id"]]
    features["row_order"] = [float(i) for i in range(n)]
    rules = {}
    for name, values in features.items():
        rules[f"max {name}"] = values
        rules[f"min {name}"] = [-v for v in values]
    categorical = {"final character": [_final_character(t or "") for t in corpus["text"]]}
    for column in CATEGORICAL_COLUMNS:
        if column in corpus:
            categorical[f"column:{column}"] = [str(v) for v in corpus[column]]
    for name, values in categorical.items():
        for value, _ in Counter(values).most_common(MAX_CATEGORIES):
            rules[f"{name} == {value}"] = [float(v == value) for v in values]
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


def rule_p_at_1(corpus: dict[str, list], qrels: dict[str, list]) -> dict[str, float]:
    """Every query-blind rule's P@1 inside the queries' groups (see the module docstring)."""
    groups = _groups(corpus, qrels)
    if not groups:
        return {}
    return {rule: sum(expected_p_at_1([scores[i] for i in rows], k) for rows, k in groups) / len(groups)
            for rule, scores in rule_scores(corpus).items()}


def audit_pool(corpus: dict[str, list], qrels: dict[str, list]) -> dict:
    """Run every rule inside every query's group. ``corpus`` holds the model columns in written
    order plus the audit's ``group`` column; the positives come from ``qrels``."""
    groups = _groups(corpus, qrels)
    if not groups:
        return {"applicable": False, "groups": 0, "passed": True,
                "reason": "every candidate is the positive of one query: a query-blind rule scores exactly chance"}
    chance = [1 / len(rows) for rows, _ in groups]
    expected = sum(chance)
    spread = math.sqrt(sum(c * (1 - c) for c in chance)) or 1.0
    results = sorted(({"rule": rule, "p_at_1": p, "z": (p * len(groups) - expected) / spread}
                      for rule, p in rule_p_at_1(corpus, qrels).items()), key=lambda r: (-r["z"], r["rule"]))
    worst = results[0]
    chance_mean = expected / len(groups)
    failing = [r for r in results if r["z"] >= Z_FAIL and r["p_at_1"] - chance_mean >= MIN_EXCESS]
    return {
        "applicable": True, "groups": len(groups), "chance": round(chance_mean, 4), "rules": len(results),
        "worst_rule": worst["rule"], "worst_p_at_1": round(worst["p_at_1"], 4), "worst_z": round(worst["z"], 2),
        "passed": not failing,
        "failing": [{"rule": r["rule"], "p_at_1": round(r["p_at_1"], 4), "z": round(r["z"], 2)} for r in failing],
    }
