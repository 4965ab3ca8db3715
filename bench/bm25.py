"""BM25 engine against the reference (rank_bm25.BM25Okapi) on a corpus of >= 10,000 passages.

Prints index time, queries/s, the speed-up ratios (target: at least 100x on queries) and
whether the top-5 order agrees on every reference query.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import DEFAULT, load_texts  # noqa: E402


def passages(texts, words_per_passage):
    for text in texts:
        words = text.split()
        for i in range(0, len(words), words_per_passage):
            chunk = words[i:i + words_per_passage]
            if len(chunk) >= 20:
                yield " ".join(chunk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT, help="directory of text/JSON files")
    parser.add_argument("--min-docs", type=int, default=10_000, help="passages to index at least")
    parser.add_argument("--reference-queries", type=int, default=20, help="queries run on rank_bm25 (slow)")
    parser.add_argument("--queries", type=int, default=500, help="queries run on our engine")
    args = parser.parse_args()

    from rank_bm25 import BM25Okapi

    from mmlongembed.ops.bm25 import B, EPSILON, K1, BM25Index, bm25_tokenize

    texts = load_texts(args.corpus)
    words = 150
    docs = list(passages(texts, words))
    while len(docs) < args.min_docs and words > 30:
        words -= 20
        docs = list(passages(texts, words))
    tokenized = [bm25_tokenize(d) for d in docs]
    rng = np.random.default_rng(0)
    query_docs = rng.choice(len(docs), size=args.queries, replace=False)
    queries = [tokenized[i][:12] for i in query_docs]

    start = time.perf_counter()
    ours = BM25Index(tokenized)
    our_index = time.perf_counter() - start
    start = time.perf_counter()
    our_top = [[i for i, _ in ours.top_k(q, 5)] for q in queries]
    our_query = (time.perf_counter() - start) / len(queries)

    start = time.perf_counter()
    reference = BM25Okapi(tokenized, k1=K1, b=B, epsilon=EPSILON)
    ref_index = time.perf_counter() - start
    start = time.perf_counter()
    ref_top = []
    for q in queries[: args.reference_queries]:
        scores = np.asarray(reference.get_scores(q))
        ref_top.append(list(np.lexsort((np.arange(len(docs)), -scores))[:5]))
    ref_query = (time.perf_counter() - start) / args.reference_queries

    agree = sum(a == b for a, b in zip(our_top, ref_top))
    print(f"corpus: {len(docs)} passages of <= {words} words")
    print(f"index:   ours {our_index:.2f} s, rank_bm25 {ref_index:.2f} s ({ref_index / our_index:.1f}x)")
    print(f"queries: ours {1 / our_query:,.0f}/s, rank_bm25 {1 / ref_query:,.1f}/s "
          f"-> speed-up {ref_query / our_query:,.0f}x (target >= 100x)")
    print(f"top-5 order identical on {agree}/{len(ref_top)} reference queries")


if __name__ == "__main__":
    main()
