"""The page store: rendered pages on disk, named by their content, so that a build holds in memory
no page at all between rendering and writing (a paged source at its real size renders thousands
of pages; the pools place hundreds of megabytes of them, many times over).

``PageStore.put`` writes a rendered page once (``<sha256>.img`` in the store's folder; two equal
pages are one file) and returns a ``StoredPage``: its size and key, equal to (and hashed as) any
stored page of the same content, its bytes read from disk each time they are asked for and never
kept. A segment places the ``StoredPage`` itself as its image (``documents.image_data``): the
writer reads a page when it writes the row group that places it, and lets it go with that row
group. The folder is a temporary one, removed when the store is closed, or when neither the store
nor any of its pages is referenced any more.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mmlongembed.core.digests import content_sha256
from mmlongembed.media.pdf import StoredImage
from mmlongembed.core.tokens import image_tokens


@dataclass(eq=False)
class StoredPage:
    """A page in the store: ``StoredImage``'s fields, its bytes read from disk when asked for.
    Equal and hashed by content (its sha256), as the bytes it stands for would be; ``len`` is the
    size of those bytes."""

    path: Path
    sha256: str
    height: int
    width: int
    size: int
    # the store whose folder holds the page: kept alive (its folder kept) while the page is placed
    store: "PageStore | None" = field(default=None, repr=False)

    @property
    def tokens(self) -> int:
        return image_tokens(self.height, self.width)

    @property
    def data(self) -> bytes:
        if self.store is not None:
            self.store.reads += 1
        return self.path.read_bytes()

    def __len__(self) -> int:
        return self.size

    def __eq__(self, other) -> bool:
        return isinstance(other, StoredPage) and other.sha256 == self.sha256

    def __hash__(self) -> int:
        return hash(self.sha256)


class PageStore:
    """Rendered pages on disk, keyed by their sha256, in a temporary folder of their own."""

    def __init__(self):
        self._folder = tempfile.TemporaryDirectory(prefix="mmle-pages-")
        self.root = Path(self._folder.name)
        self.bytes_written = 0
        self.reads = 0  # pages read back (``StoredPage.data``): what a test can watch

    def put(self, image: StoredImage) -> StoredPage:
        key = content_sha256(image.data)
        path = self.root / f"{key}.img"
        if not path.exists():
            scratch = path.with_suffix(".writing")
            scratch.write_bytes(image.data)
            os.replace(scratch, path)
            self.bytes_written += len(image.data)
        return StoredPage(path, key, image.height, image.width, len(image.data), self)

    def close(self) -> None:
        self._folder.cleanup()
