"""Each model's own count (issue 26 point 3): per pool and model, the inputs' lengths in the model's own
tokens (its tokenizer, its image processor, its prompt template) beside the benchmark's yardstick
(Qwen3 tokenizer, 32-px image cells), and how many were over the model's window and lost their middle.
A 28-px model pays (32/28)^2 = 1.31 times the yardstick for an image, so an image-only "32K" pool is
about 42K of its tokens: this table shows it."""

from __future__ import annotations

OWN_LENGTHS_TITLE = ("Each model's own count: mean input length in the model's own tokens / on the benchmark's "
                     "yardstick (ratio), longest input, and inputs over the model's window (middle dropped)")


def _side(figures: dict) -> tuple[str, str, str]:
    if not figures.get("n"):
        return "-", "-", "0"
    ratio = f" (x{figures['ratio']:.2f})" if figures.get("ratio") else ""
    return (f"{figures['own_mean']:.0f} / {figures['yardstick_mean']:.0f}{ratio}", str(figures["own_max"]),
            f"{figures['over_window']}/{figures['n']}")


def own_lengths_table(rows) -> str:
    """One line per model and pool that reports its own lengths (profile models); "" where none does."""
    rows = [r for r in rows if r.get("own_lengths")]
    if not rows:
        return ""
    lines = ["| Model | Pool | Window | Image cell | Queries: own / yardstick | Longest query | Queries over window | "
             "Candidates: own / yardstick | Longest candidate | Candidates over window |",
             "|---|---|---:|---:|---|---:|---:|---|---:|---:|"]
    for r in rows:
        figures = r["own_lengths"]
        queries, candidates = _side(figures["queries"]), _side(figures["candidates"])
        lines.append(f"| {r['model']} | {r['pool']} | {figures['window']} | {figures['image_cell_px']} px | "
                     f"{' | '.join(queries)} | {' | '.join(candidates)} |")
    return "\n".join(lines)
