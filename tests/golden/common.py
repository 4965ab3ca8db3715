"""What every golden-vector family shares (tests/golden/<family>.py): the summary that identifies
the tiny weights behind the goldens, and the fingerprint of the inputs and instructions they were
made from."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


WEIGHTS_TOLERANCE = 1e-4  # relative, on a tensor's sum and sum of squares (a sum: or within _last_bits_of_sum)
FLOAT32_EPS = 2.0 ** -23


def weights_summary(directory: Path) -> dict:
    """What identifies the tiny model behind the goldens: per tensor its dtype, shape, sum and sum of
    squares (float64), and the sha256 of the tokenizer's vocabulary. Not a hash of the bytes: another
    CPU may draw the seeded weights a few ULPs apart (torch's vectorised normal sampler), which moves no
    embedding near the gate, while another seed, config or tokenizer moves these sums far
    (``weights_differ``)."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    tensors = {}
    for file in sorted(Path(directory).glob("*.safetensors")):
        for name, tensor in sorted(load_file(str(file)).items()):
            values = tensor.double()
            # ten digits: the summation order (threads) moves the last bits, the tolerance is far wider
            tensors[name] = [str(tensor.dtype), list(tensor.shape), float(f"{float(values.sum()):.10g}"),
                             float(f"{float((values * values).sum()):.10g}")]
    vocab = AutoTokenizer.from_pretrained(str(directory)).get_vocab()
    return {"tensors": tensors, "vocab_sha256": hashlib.sha256(json.dumps(sorted(vocab.items())).encode()).hexdigest()}


def weights_differ(recorded: dict, measured: dict) -> list[str]:
    """The tensors (or the vocabulary) in which ``measured`` is not the model ``recorded`` describes."""
    import math

    problems = [] if recorded["vocab_sha256"] == measured["vocab_sha256"] else ["the tokenizer's vocabulary"]
    for name in sorted(set(recorded["tensors"]) | set(measured["tensors"])):
        a, b = recorded["tensors"].get(name), measured["tensors"].get(name)
        if a is None or b is None or a[:2] != b[:2] or not (
                math.isclose(a[2], b[2], rel_tol=WEIGHTS_TOLERANCE,
                             abs_tol=max(WEIGHTS_TOLERANCE, _last_bits_of_sum(a)))
                and math.isclose(a[3], b[3], rel_tol=WEIGHTS_TOLERANCE, abs_tol=WEIGHTS_TOLERANCE)):
            problems.append(name)
    return problems


def _last_bits_of_sum(figures: list) -> float:
    """How far a tensor's sum may move when every value moves by one float32 epsilon of the tensor's
    root mean square, in the same direction: eps * n * rms = eps * sqrt(n * sum of squares). Relative to
    itself, a sum that cancels to near zero is no measure: lm_head's -7.36 (norm 44, 4.85M values) moves by
    2.4e-4 of itself, 3.9e-5 of its norm, where torch draws the seeded weights without AVX2
    (ATEN_CPU_CAPABILITY=default: scalar log, sin, cos), a seventh of this allowance; another seed moves a
    sum by about the norm, thousands of times the allowance."""
    import math

    n = math.prod(figures[1])
    return FLOAT32_EPS * math.sqrt(n * figures[3])


def fingerprint_of(items: list[dict], sides: dict) -> str:
    """sha256 over the inputs (kind, text, image bytes) and the instruction of each side."""
    digest = hashlib.sha256(json.dumps(sides, sort_keys=True).encode())
    for item in items:
        digest.update(json.dumps([item["kind"], item["text"]]).encode())
        for image in item["images"]:
            digest.update(hashlib.sha256(image).digest())
    return digest.hexdigest()


def golden_parser(description: str, repo: str, golden_file: Path, default_commit: str = "HEAD",
                  official_required: bool = True):
    """The options every golden script takes: the official checkout, the commit to run, the output."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--official", type=Path, required=official_required,
                        help=f"a clone of {repo} (work tree or bare git directory)")
    parser.add_argument("--commit", default=default_commit,
                        help=f"the commit to run (default: {default_commit}{' of the checkout' if default_commit == 'HEAD' else ''})")
    parser.add_argument("--out", type=Path, default=golden_file, help="where the goldens are written")
    return parser


def write_goldens(out: Path, golden, official: dict, ran_with: dict, weights: dict, runs: dict) -> None:
    """The goldens with what made them: the official code run, the libraries, the tiny weights' summary
    and the inputs' fingerprint (``golden``: the family's module)."""
    record = {"official": official, "ran_with": ran_with, "weights": weights,
              "inputs_fingerprint": golden.inputs_fingerprint(),
              "inputs": [item["kind"] for item in golden.inputs()], "sides": golden.SIDES, **runs}
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {out}: {official['repo']}@{official['commit']}")
