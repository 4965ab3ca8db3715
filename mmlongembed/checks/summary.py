"""What users look at after a build: the summary table, the length histogram, shortcut checks."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Sequence

from mmlongembed.ops.bm25 import BM25Index, bm25_tokenize
from mmlongembed.core.documents import IMAGE_PLACEHOLDER, Document
from mmlongembed.core.pools import POSITIVE, Pool


def counted(n: int, plural: str) -> str:
    """``n`` with its noun in number: (1, "problems") -> "1 problem", (3, "queries") -> "3 queries"."""
    if n != 1:
        return f"{n} {plural}"
    return f"{n} {plural[:-3] + 'y' if plural.endswith('ies') else plural.removesuffix('s')}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence], align_right_from: int = 1,
                 align_left_from: int | None = None) -> str:
    """A plain-text table: columns from ``align_right_from`` (figures) right-aligned, up to
    ``align_left_from`` (text after the figures), the rest left-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    left_from = len(headers) if align_left_from is None else align_left_from

    def line(row):
        return "  ".join(c.rjust(w) if align_right_from <= i < left_from else c.ljust(w)
                         for i, (c, w) in enumerate(zip(row, widths)))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def expected_p_at_1(scores: Sequence[float], positive: int) -> float:
    """P@1 with ties at the top broken at random, in expectation: 1/k if the positive is among
    the k best (the harness's tie rule, so build-time and scoring figures agree)."""
    best = max(scores)
    tied = [i for i, s in enumerate(scores) if s == best]
    return 1 / len(tied) if positive in tied else 0.0


def shortcut_check(pool: Pool, words: dict[str, list[str]] | None = None) -> dict:
    """BM25 P@1 of the query text inside each query's own candidate group (index over the whole
    pool; image placeholders are markup, not words): how far surface matching gets. Ties count by
    expectation (``expected_p_at_1``). Query-blind rules (length, formatting, ids, order) are the
    label-free audit's (``mmlongembed.checks.shortcuts``), run on the data as written.

    Where every group is its positive alone (the synthetic grid: one needle per document, all
    documents of the pool compete), the whole pool is the group. ``words`` caches the words of
    text pieces (``document_words``): pass one dict to pools that share text."""
    groups: dict[str, list] = defaultdict(list)
    for c in pool.candidates:
        groups[c.group].append(c)
    if groups and all(len(members) == 1 for members in groups.values()):
        groups = {group: list(pool.candidates) for group in groups}
    queries = {q.id: q for q in pool.queries}
    if not pool.candidates:
        return {"groups": 0, "chance": 0.0, "bm25": None}
    words = {} if words is None else words
    index = BM25Index([document_words(c.document, words) for c in pool.candidates])
    position = {c.id: i for i, c in enumerate(pool.candidates)}
    hits, sizes = 0.0, []
    for group, members in groups.items():
        if group not in queries:
            continue
        sizes.append(len(members))
        positive = next(i for i, c in enumerate(members) if c.role == POSITIVE and c.group == group)
        scores = index.scores(_words(queries[group].text))
        hits += expected_p_at_1([scores[position[c.id]] for c in members], positive)
    n = len(sizes)
    if not n:
        return {"groups": 0, "chance": 0.0, "bm25": None}
    return {"groups": n, "chance": sum(1 / s for s in sizes) / n, "bm25": hits / n}


def _words(text: str) -> list[str]:
    return bm25_tokenize(text.replace(IMAGE_PLACEHOLDER, " "))


def document_words(document: Document, cache: dict[str, list[str]]) -> list[str]:
    """``_words`` of the rendered document, line by line, the words of each line looked up in
    ``cache`` (padding repeats across a pool's documents). Exact: a newline is whitespace, so no
    word runs across it, and NFKC and lower-casing treat the text on its two sides apart (a
    final sigma before a newline is final either way)."""
    out: list[str] = []
    for line in document.render()[0].replace(IMAGE_PLACEHOLDER, " ").split("\n"):
        words = cache.get(line)
        if words is None:
            words = cache[line] = bm25_tokenize(line)
        out += words
    return out


def length_histogram(pools: Sequence[Pool], path: Path) -> None:
    """Candidate token lengths, one panel per length band (paper Figure 1), written to `path`."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig = length_histogram_figure(pools)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def length_histogram_figure(pools: Sequence[Pool]):
    """Candidate token lengths, one panel per length band (paper Figure 1): the figure itself."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    by_length: dict[int, list[Pool]] = defaultdict(list)
    for p in pools:
        by_length[p.band.target].append(p)
    targets = sorted(by_length) or [0]
    columns = min(len(targets), 4)  # long grids wrap onto several rows
    rows = -(-len(targets) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns + 1, 2.8 * rows), squeeze=False)
    for ax in axes.flat[len(targets):]:
        ax.set_visible(False)
    for ax, target in zip(axes.flat, targets):
        by_difficulty: dict[str, list[int]] = defaultdict(list)
        for p in by_length.get(target, []):
            by_difficulty[p.difficulty].extend(c.n_tokens for c in p.candidates)
        for difficulty, lengths in sorted(by_difficulty.items()):
            ax.hist(lengths, bins=20, alpha=0.6, label=f"{difficulty} ({len(lengths)})")
        band = by_length[target][0].band if by_length.get(target) else None
        ax.set_title(f"{band.name} band" if band else "no pools")
        ax.set_xlabel("tokens (Qwen3 + image patches)")
        # at most four ticks, in thousands: five-digit counts at 1,000 steps ran together (MMDocRAG 16K)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))
        ax.xaxis.set_major_formatter(FuncFormatter(_thousands))
        if by_difficulty:
            ax.legend(fontsize=7)
    for row in axes:
        row[0].set_ylabel("candidates")
    fig.tight_layout()
    return fig


def _thousands(x: float, _position=None) -> str:
    """A tick's token count: 12k, 12.5k; below a thousand as it is."""
    return f"{x / 1000:g}k" if abs(x) >= 1000 else f"{x:g}"
