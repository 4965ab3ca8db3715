"""Token counter throughput against the reference tokenizer, both on one core, same corpus.

Prints tokens/s of each, the ratio (target: at least 5x) and the number of count mismatches
(target: 0). Special-token strings are left out of the mismatch count: we count them as plain
text on purpose (see mmlongembed/core/tokens.py).
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"  # the reference's Rust thread pool: one core, like ours
os.environ["TOKENIZERS_PARALLELISM"] = "false"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import DEFAULT, load_texts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT, help="directory of text/JSON files")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the corpus; the best is kept")
    args = parser.parse_args()

    from tokenizers import Tokenizer

    from mmlongembed.core.tokens import default_counter, reference_tokenizer_file

    texts = load_texts(args.corpus)
    ours = default_counter()
    reference = Tokenizer.from_file(str(reference_tokenizer_file()))

    def best_time(fn):
        best, result = float("inf"), None
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = fn()
            best = min(best, time.perf_counter() - start)
        return best, result

    our_time, our_counts = best_time(lambda: ours.count_many(texts, num_threads=1))
    ref_time, ref_counts = best_time(
        lambda: [len(reference.encode(t, add_special_tokens=False).ids) for t in texts])
    tokens = sum(our_counts)
    mismatches = sum(1 for t, a, b in zip(texts, our_counts, ref_counts) if a != b and "<|" not in t)
    print(f"corpus: {len(texts)} texts, {sum(len(t.encode()) for t in texts) / 1e6:.1f} MB, {tokens / 1e6:.2f} M tokens")
    print(f"ours (tiktoken):        {tokens / our_time / 1e6:6.2f} M tokens/s")
    print(f"reference (tokenizers): {sum(ref_counts) / ref_time / 1e6:6.2f} M tokens/s")
    print(f"speed-up: {ref_time / our_time:.1f}x (target >= 5x); count mismatches: {mismatches} (target 0)")


if __name__ == "__main__":
    main()
