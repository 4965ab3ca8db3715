"""Refuse, before any pool is built, ``--lengths`` that the sources cannot fill or that memory
cannot hold, in one line that says the largest length the sources support.

Each builder that takes ``--lengths`` says what bounds its documents (``Builder.largest_length``:
the longest source document, where documents keep their natural length; all the text a document
may be grown from, where they are grown) and, where sources do not bound them (a haystack of
photos drawn again and again), what a build would hold in memory (``Builder.memory_needed``).
Both are upper bounds: a length within them may still leave pools empty (counted skips), a
length beyond them cannot give any pool a query, or would be killed by the kernel.

A builder whose candidates hold images also estimates its output before anything is rendered
(``Builder.output_estimate``): the bytes of its largest candidate, which must fit one value that
a parquet file can be read back with (``layout.READ_BACK_LIMIT``), and the bytes it holds at its
peak. A build that could not be read back, or not held, is refused in one line naming the options
that shrink it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from mmlongembed.core.errors import UserError
from mmlongembed.core.parallel import available_memory
from mmlongembed.output.layout import READ_BACK_LIMIT, ROW_GROUP_BYTES


@dataclass(frozen=True)
class LengthLimit:
    """The largest length target the loaded sources can fill, and what sets it."""

    tokens: int
    because: str  # e.g. "the longest report has 13991 tokens; a pool of length L needs one above L/2"


def halving_limit(longest: int, what: str) -> LengthLimit:
    """For pools of natural-length documents in (L/2, L] (``LengthBand.halving``): the longest
    document must lie above L/2, so L is at most 2 x its length - 1."""
    return LengthLimit(2 * longest - 1, f"{what} has {longest} tokens, and a pool of length L needs one above L/2")


def longest_text_tokens(items, counter, candidates: int = 8, characters=len, text=lambda item: item) -> int:
    """The token count of the longest of ``items`` (texts; or records, with ``characters`` and
    ``text`` of each): counted exactly on the ``candidates`` with the most characters (a token
    spans at least one character, and the count follows the length closely enough that the
    longest in tokens is among them), not on all of them, and only their text is made."""
    longest = heapq.nlargest(candidates, items, key=characters)
    return max(counter.count_many([text(item) for item in longest]), default=0)


@dataclass(frozen=True)
class OutputEstimate:
    """What a build would write and hold, estimated before rendering (under-estimates: only a build
    that surely cannot be read back or held is refused)."""

    largest_row_bytes: int  # the largest candidate's images and text, decoded
    held_bytes: int  # what the build holds in memory at its peak
    shrink: str  # the options that make both smaller, e.g. "shorter --lengths or a smaller --max-image-pixels"


# Bytes per stored pixel of rendered document pages, on the low side of what pages cost (text pages
# at JPEG quality 90 take about 0.15-0.25; photos more): an estimate that refuses only what surely fails.
BYTES_PER_PIXEL = {"JPEG": 0.08, "PNG": 0.2}
PIXELS_PER_IMAGE_TOKEN = 32 * 32  # an image costs ceil(H/32) * ceil(W/32) tokens
# What a build holds besides its sources: the writer's row group (as arrow arrays, and compressed
# in the parquet writer), and the validator's row group as it reads it back (its workers also keep
# the row groups they decoded last, within a quarter of the memory available: ``build_checks``).
WRITE_AND_READ_BYTES = 3 * ROW_GROUP_BYTES


def image_bytes(tokens: int, image_format: str) -> int:
    """About the encoded bytes of images that cost ``tokens`` tokens, stored as ``image_format``."""
    return int(tokens * PIXELS_PER_IMAGE_TOKEN * BYTES_PER_PIXEL.get(image_format, BYTES_PER_PIXEL["JPEG"]))


def check_output(estimate: OutputEstimate | None, lengths) -> None:
    """One line, before rendering, for a build whose largest candidate could not be read back from
    a parquet file or whose peak would not fit in the memory available."""
    if estimate is None:
        return
    where = f"--lengths up to {max(lengths)}" if lengths else "this build"
    if estimate.largest_row_bytes > READ_BACK_LIMIT:
        raise UserError(f"{where}: one candidate would hold about {estimate.largest_row_bytes / 2**30:.1f} GiB of "
                        f"images, more than a parquet file can be read back with ({READ_BACK_LIMIT / 2**30:.1f} GiB "
                        f"per value); choose {estimate.shrink}")
    available = available_memory()
    if available and estimate.held_bytes > available:
        raise UserError(f"{where}: the build would hold about {estimate.held_bytes / 1e9:.1f} GB in memory, more "
                        f"than the {available / 1e9:.1f} GB available here; choose {estimate.shrink}")


def check_shortest_length(builder, config) -> None:
    """One line, before the sources are read, for a ``--lengths`` target below what the builder's
    recipe makes sense at (``Builder.shortest_length``); nothing for builders without ``--lengths``."""
    lengths = sorted(set(getattr(config, "lengths", None) or ()))
    not_positive = [length for length in lengths if length < 1]
    if not_positive:
        raise UserError(f"--lengths {' '.join(map(str, not_positive))}: a length is a positive number of tokens")
    below = [length for length in lengths if length < builder.shortest_length]
    if below:
        raise UserError(f"--lengths {' '.join(map(str, below))}: {builder.name} builds lengths of at least "
                        f"{builder.shortest_length} tokens ({builder.shortest_length_reason})")


def check_lengths(builder, sources, config) -> None:
    """One line, before any pool is built, for lengths beyond what ``sources`` can fill or what
    memory can hold; nothing for builders without ``--lengths``."""
    lengths = sorted(set(getattr(config, "lengths", None) or ()))
    if not lengths:
        return
    limit = builder.largest_length(sources, config)
    if limit is not None and limit.tokens > 0 and lengths[-1] > limit.tokens:
        beyond = [length for length in lengths if length > limit.tokens]
        raise UserError(f"--lengths {' '.join(map(str, beyond))}: longer than these sources can fill; the largest "
                        f"length they support is at most {limit.tokens} tokens ({limit.because})")
    needed, available = builder.memory_needed(config), available_memory()
    if needed and available and needed > available:
        raise UserError(f"--lengths up to {lengths[-1]}: the build would hold about {needed / 1e9:.1f} GB of documents "
                        f"in memory, more than the {available / 1e9:.1f} GB available here; choose shorter --lengths "
                        f"or fewer pools")
    check_output(builder.output_estimate(sources, config), lengths)


def planned_memory(lengths, documents_per_length: int, bytes_per_token: float) -> int:
    """What ``documents_per_length`` documents of each length hold in memory, at
    ``bytes_per_token`` (an under-estimate is safer: only a build that surely cannot fit is refused)."""
    return int(sum(lengths) * documents_per_length * bytes_per_token)
