"""The EviAlign-Evidence invariants, checked on a training build as written.

What a verifier can prove from the parquet and the manifest alone: the student tokenizer is the
one the build recorded; every input row's targets parse, hold the same spans in the Semantic and
the seeded Mixed order, encode to their stored ids with the boundary and Distributed readout
positions where the paper puts them, stay under the length limit and pass the repetition filter;
every pair names two stored inputs and no out-of-domain subset.
"""

from __future__ import annotations

import json
from typing import Iterable

from mmlongembed.core.builder import Problem
from mmlongembed.training.evialign import student_tokenizer
from mmlongembed.ops.evialign import (
    TargetFormatError, distributed_positions, parse_target, permute, remove_ids, repetition, units_for)
from mmlongembed.ops.permutations import non_identity_permutation
from mmlongembed.readers.mmeb_train import OOD_KEYS, normalised_subset
from mmlongembed.core.rng import derive_rng


def check_training(builder: str, tables: dict[str, dict[str, list]], manifest: dict) -> list[Problem]:
    """Every problem of the build's ``inputs`` and ``pairs`` (``builder``: the registry name its
    generators were derived under)."""
    config = manifest.get("config") or {}
    problems: list[Problem] = []
    for name in ("inputs", "pairs"):
        if name not in tables:
            return [Problem(name, "configs", f"the build has no config {name}")]
    try:
        units = units_for(int(config.get("units", 5)))
    except ValueError as error:
        return [Problem("*", "units", str(error))]
    tokens = [u.token for u in units]
    tokenizer = student_tokenizer(config.get("student_tokenizer"), tuple(tokens))
    recorded = (manifest.get("tokenizer") or {})
    if recorded.get("sha256") != tokenizer.sha256 or \
            recorded.get("boundary_token_ids") != dict(zip(tokens, tokenizer.token_ids)):
        return [Problem("*", "tokenizer", "the student tokenizer differs from the one the build recorded")]
    inputs = tables["inputs"]
    rows = [{k: v[i] for k, v in inputs.items()} for i in range(len(inputs["input_id"]))]
    for row in rows:
        problems += [Problem(row["input_id"][:16], check, detail)
                     for check, detail in check_input_row(row, units, tokenizer, config, builder)]
    problems += check_pairs(tables["pairs"], set(inputs["input_id"]))
    return problems


def check_input_row(row: dict, units, tokenizer, config: dict, builder: str) -> Iterable[tuple[str, str]]:
    """The invariants of one input row (yields (check, detail)); ``builder``: the registry name
    the Mixed permutation's generator was derived under."""
    k = len(units)
    try:
        semantic = parse_target(row["target_semantic"], units, labels_in_order=True)
        mixed = parse_target(row["target_mixed"], units, labels_in_order=False)
    except TargetFormatError as error:
        yield "target_format", error.reason
        return
    if [row["units"][u.key] for u in units] != semantic:
        yield "units", "the units column differs from the semantic target's spans"
    perm = list(row["mixed_permutation"])
    expected = list(non_identity_permutation(
        derive_rng(int(config.get("seed", 0)), builder, row["input_id"], "mixed"), k))
    if perm != expected:
        yield "mixed_permutation", f"{perm} is not the seeded permutation {expected}"
    if k > 1 and perm == list(range(k)):
        yield "mixed_permutation", "the identity"
    if sorted(mixed) != sorted(semantic) or permute(semantic, perm) != mixed:
        yield "mixed_spans", "slot k must hold the semantic span perm[k]"
    span_ids = [tokenizer.encode(span) for span in semantic]
    t = sum(len(s) for s in span_ids)
    if row["T"] != t:
        yield "T", f"stored {row['T']}, the spans have {t} ids"
    for condition, order in (("semantic", list(range(k))), ("mixed", perm)):
        yield from _check_condition(row, condition, order, span_ids, units, tokenizer)
    if len(row["target_ids_semantic"]) > int(config.get("max_evidence_tokens", 8192)):
        yield "over_limit", f"{len(row['target_ids_semantic'])} tokens"
    measures = repetition([i for s in span_ids for i in s], [s.split("] ", 1)[1] for s in semantic],
                          int(config.get("repetition_ngram", 8)), int(config.get("repetition_max", 3)))
    if measures["excessive"]:
        yield "repetition", json.dumps(measures)
    if "<think>" in row["target_semantic"] or "</think>" in row["target_semantic"]:
        yield "reasoning_block", "the teacher's reasoning is in the target"


def _check_condition(row: dict, condition: str, order: list[int], span_ids: list[list[int]], units,
                     tokenizer) -> Iterable[tuple[str, str]]:
    """One condition's (Semantic or Mixed) ids and its Boundary, Trailing and Distributed readout
    positions."""
    token_ids = list(tokenizer.token_ids)
    k, t = len(span_ids), sum(len(s) for s in span_ids)
    ids = list(row[f"target_ids_{condition}"])
    if tokenizer.encode(row[f"target_{condition}"]) != ids:
        yield "round_trip", f"{condition}: encoding the target text does not give its ids"
    positions = list(row[f"readout_positions_{condition}_boundary"])
    if [ids[p] for p in positions if 0 <= p < len(ids)] != token_ids or positions[-1] != len(ids) - 1:
        tokens = [u.token for u in units]
        yield "boundary_positions", f"{condition}: the positions do not hold {tokens} with the last one last"
    if [i for i in ids if i in token_ids] != token_ids:
        yield "boundary_tokens", f"{condition}: each boundary id must occur once, in order"
    if list(row[f"readout_positions_{condition}_trailing"]) != positions[-1:]:
        yield "trailing_positions", condition
    x = [i for span in permute(span_ids, order) for i in span]
    spread = list(row[f"target_ids_{condition}_distributed"])
    where = list(row[f"readout_positions_{condition}_distributed"])
    if remove_ids(spread, token_ids) != x:
        yield "distributed", f"{condition}: removing the readout ids does not give X"
    if where != distributed_positions(t, k) or [spread[p] for p in where if p < len(spread)] != token_ids:
        yield "distributed", f"{condition}: readout ids are not after floor(kT/K) ids of X"
    elif any(sum(1 for i in spread[:p] if i not in token_ids) != (j * t) // k for j, p in enumerate(where, 1)):
        yield "distributed", f"{condition}: a readout id does not follow exactly floor(kT/K) ids of X"
    if where and where[-1] != len(spread) - 1:
        yield "distributed", f"{condition}: the last readout id is not last"


def check_pairs(pairs: dict[str, list], input_ids: set[str]) -> list[Problem]:
    problems = []
    if len(set(pairs["pair_id"])) != len(pairs["pair_id"]):
        problems.append(Problem("pairs", "pair_id", "repeated pair ids"))
    for pid, subset, query, candidate in zip(pairs["pair_id"], pairs["subset"], pairs["query_input_id"],
                                             pairs["candidate_input_id"]):
        if normalised_subset(subset) in OOD_KEYS:
            problems.append(Problem(pid, "ood_subset", f"{subset} is an out-of-domain evaluation set"))
        for side, iid in (("query", query), ("candidate", candidate)):
            if iid not in input_ids:
                problems.append(Problem(pid, "pair_inputs", f"its {side} input {iid[:16]} is not in `inputs`"))
    return problems
