"""The page store: rendered pages on disk, named by their content, so that a build holds in memory
only the pages its pools place, not every page it rendered (a paged source at its real size
renders thousands of pages, most beyond any window).

``PageStore.put`` writes a rendered page once (``<sha256>.img`` in the store's folder; two equal
pages are one file) and returns a ``StoredPage``: its size and key, and its bytes read on first
use and then held, so that every candidate placing the page shares one bytes object. The folder
is a temporary one, removed when the store is closed or let go.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mmlongembed.digests import content_sha256
from mmlongembed.media.pdf import StoredImage
from mmlongembed.tokens import image_tokens


@dataclass(eq=False)
class StoredPage:
    """A page in the store: ``StoredImage``'s fields, its bytes read from disk when first asked for."""

    path: Path
    sha256: str
    height: int
    width: int
    _data: bytes | None = field(default=None, repr=False)

    @property
    def tokens(self) -> int:
        return image_tokens(self.height, self.width)

    @property
    def loaded(self) -> bool:
        return self._data is not None

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data = self.path.read_bytes()
        return self._data


class PageStore:
    """Rendered pages on disk, keyed by their sha256, in a temporary folder of their own."""

    def __init__(self):
        self._folder = tempfile.TemporaryDirectory(prefix="mmle-pages-")
        self.root = Path(self._folder.name)
        self.bytes_written = 0

    def put(self, image: StoredImage) -> StoredPage:
        key = content_sha256(image.data)
        path = self.root / f"{key}.img"
        if not path.exists():
            scratch = path.with_suffix(".writing")
            scratch.write_bytes(image.data)
            os.replace(scratch, path)
            self.bytes_written += len(image.data)
        return StoredPage(path, key, image.height, image.width)

    def close(self) -> None:
        self._folder.cleanup()
