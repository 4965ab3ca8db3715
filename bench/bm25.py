"""BM25 engine against the reference (rank_bm25.BM25Okapi) on a corpus of >= 10,000 passages.

Prints index time, queries/s, the speed-up ratios (target: at least 100x on queries) and
whether the top-5 order agrees on every reference query; first, the facts the ratio depends on.

The reference's query costs a Python loop over every document per query word (corpus size x
query length dict look-ups), ours a few numpy calls over the query words' postings and a scan of
the scores. Neither uses BLAS or threads. What differs by machine is numpy's SIMD dispatch: its
partition and quicksort kernels (x86-simd-sort) were the engine's largest cost on an AVX2 machine
and far more on AMD Zen 4, whose AVX-512 compress-store runs in microcode; the engine no longer
calls them, and the line "np.partition of a query's scores" shows what one call costs here.

Measured on 2026-12-04 over the shared sample data (12,484 passages), each run on two cores:
AMD EPYC (family 25, AVX2, numpy 2.4, loaded) 271x; Intel Xeon (family 6 model 207, AVX-512,
numpy 2.5.2 dispatching AVX512_SPR, pinned to two cores with taskset) 374x and 260x quiet, 296x
with a busy loop on each of the two cores. There one np.partition of a query's scores costs 2.3
to 3.3 times a whole query of ours: the cost the engine no longer pays.
"""

import argparse
import os
import platform
import sys
import time
from collections import Counter
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


def cpu() -> str:
    """Model, vendor family/model and the SIMD flags that pick numpy's kernels."""
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or platform.machine()
    flags = set(fields.get("flags", "").split())
    simd = [f for f in ("avx2", "avx512f", "avx512dq", "avx512vbmi2") if f in flags]
    family = fields.get("cpu family", "?")
    zen4 = fields.get("vendor_id") == "AuthenticAMD" and family == "25" and "avx512f" in flags
    return (f"{fields.get('model name', '?')} ({fields.get('vendor_id', '?')} family {family} model "
            f"{fields.get('model', '?')}), flags {' '.join(simd) or 'none of avx2/avx512'}"
            + (" -- AMD Zen 4: AVX-512 compress-store in microcode" if zen4 else ""))


def numpy_facts() -> str:
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    enabled = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
    disabled = os.environ.get("NPY_DISABLE_CPU_FEATURES")
    return (f"numpy {np.__version__}, SIMD dispatch enabled: {' '.join(enabled) or 'baseline only'}"
            + (f" (NPY_DISABLE_CPU_FEATURES={disabled})" if disabled else ""))


def threads() -> str:
    env = [f"{k}={os.environ[k]}" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
           if k in os.environ]
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (f"{os.cpu_count()} CPUs, {usable} usable, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
            f"{', ' + ' '.join(env) if env else ''} (neither engine uses BLAS or threads)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT, help="directory of text/JSON files")
    parser.add_argument("--min-docs", type=int, default=10_000, help="passages to index at least")
    parser.add_argument("--reference-queries", type=int, default=20, help="queries run on rank_bm25 (slow)")
    parser.add_argument("--queries", type=int, default=500, help="queries run on our engine")
    args = parser.parse_args()

    from rank_bm25 import BM25Okapi

    from mmlongembed.ops.bm25 import B, EPSILON, K1, BM25Index, bm25_tokenize

    print(f"cpu:     {cpu()}")
    print(f"python:  {platform.python_implementation()} {platform.python_version()}; {numpy_facts()}")
    print(f"threads: {threads()}")
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

    # What the engine's work is, and what numpy's quickselect over a query's scores costs on
    # this machine (the engine's top-k called it once per query until it no longer did)
    occurrences = Counter(w for q in queries for w in q)
    holding = {w: np.count_nonzero(ours.scores([w])) for w in occurrences}
    per_word = sum(holding[w] * n for w, n in occurrences.items()) / sum(occurrences.values())
    query_length = np.mean([len(q) for q in queries])
    vectors = [ours.scores(q) for q in queries[:100]]
    start = time.perf_counter()
    for scores in vectors:
        np.partition(scores, len(docs) - 5)
    partition = (time.perf_counter() - start) / len(vectors)
    agree = sum(a == b for a, b in zip(our_top, ref_top))
    print(f"corpus:  {len(docs)} passages of <= {words} words from {args.corpus} ({len(texts)} texts), "
          f"{len({w for d in tokenized for w in d}):,} distinct words")
    print(f"queries: {query_length:.1f} words on average (a passage's first 12), "
          f"{per_word:,.0f} documents hold a query word on average")
    print(f"np.partition of a query's scores: {partition * 1e6:,.0f} us a call here "
          f"({partition / our_query:.1f}x our whole query)")
    print(f"index:   ours {our_index:.2f} s, rank_bm25 {ref_index:.2f} s ({ref_index / our_index:.1f}x)")
    print(f"queries: ours {1 / our_query:,.0f}/s, rank_bm25 {1 / ref_query:,.1f}/s "
          f"-> speed-up {ref_query / our_query:,.0f}x (target >= 100x)")
    print(f"top-5 order identical on {agree}/{len(ref_top)} reference queries")
    print(f"load at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
