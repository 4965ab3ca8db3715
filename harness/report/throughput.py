"""What scoring cost, per model: tokens/s by length band, with the inputs, tokens, padding, calls,
back-offs and peak memory behind it (each result row's ``throughput``, harness.scoring.batching)."""

from __future__ import annotations

TITLE = ("Throughput: tokens/s by length band (own tokens of the inputs embedded, over the wall time of their "
         "embedding, or with Ray one replica's summed time; inputs from the cache cost nothing and are not counted)")


def _band(length: int) -> str:
    return f"{length // 1024}K" if length >= 1024 and length % 1024 == 0 else str(length)


def _gib(value: int | None) -> str:
    return f"{value / 2**30:.2f}" if value else "–"


def throughput_table(rows: list[dict]) -> str:
    """One line per model that embedded something: tokens/s per pool length, then its totals."""
    measured = [r for r in rows if (r.get("throughput") or {}).get("inputs") and r["throughput"].get("own_tokens")]
    if not measured:
        return ""
    lengths = sorted({r["length"] for r in measured})
    lines = ["| Model | " + " | ".join(_band(n) for n in lengths)
             + " | inputs | own tokens | padded / own | calls | back-offs | peak memory GiB |",
             "|---|" + "---:|" * (len(lengths) + 6)]
    for model in dict.fromkeys(r["model"] for r in measured):
        mine = [r["throughput"] for r in measured if r["model"] == model]
        cells = []
        for length in lengths:
            band = [r["throughput"] for r in measured if r["model"] == model and r["length"] == length]
            seconds = sum(t["wall_s"] for t in band)
            cells.append(f"{sum(t['own_tokens'] for t in band) / seconds:,.0f}" if band and seconds > 0 else "–")
        own, padded = sum(t["own_tokens"] for t in mine), sum(t["padded_tokens"] for t in mine)
        peak = max((t["peak_memory_bytes"] or 0 for t in mine), default=0)
        lines.append(f"| {model} | " + " | ".join(cells) + f" | {sum(t['inputs'] for t in mine)} | {own:,} | "
                     f"{padded / own:.3f} | {sum(t['batches'] for t in mine)} | "
                     f"{sum(len(t['backoffs']) for t in mine)} | {_gib(peak)} |")
    return "\n".join(lines)
