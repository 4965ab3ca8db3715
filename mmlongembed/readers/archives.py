"""Zip archives read in place: the releases that ship their images or videos zipped (MMEB-train's
``images_zip/<Subset>.zip``, YoukuDC's ``train.zip`` / ``val.zip``, MMDocRAG's ``images.zip``) are
never unpacked by hand; a member is read from the archive, or extracted once where a decoder
needs a file."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path
from typing import Callable

from mmlongembed.core.errors import UserError


class ZipMembers:
    """One zip archive, opened once (a clear one-line error when it is no readable zip), its
    members indexed by path and by file name. ``keep`` says which members the index holds (e.g.
    not macOS ``__MACOSX/`` entries, or only videos); ``read`` takes any member by its exact path."""

    def __init__(self, path: Path, keep: Callable[[str], bool] = lambda member: True):
        self.path = Path(path)
        try:
            self.archive = zipfile.ZipFile(self.path)
        except (OSError, zipfile.BadZipFile) as error:
            raise UserError(f"{self.path}: not a readable zip archive ({error})") from None
        self.index: dict[str, str] = {}  # member path or file name -> member (the first one wins)
        for member in self.archive.namelist():
            if keep(member):
                self.index.setdefault(member, member)
                self.index.setdefault(member.rsplit("/", 1)[-1], member)

    def find(self, *names: str) -> str | None:
        """The kept member the first of ``names`` that is one's path or file name names."""
        return next((self.index[name] for name in names if name in self.index), None)

    def read(self, member: str) -> bytes | None:
        """The bytes of the member at exactly this path (None when there is none)."""
        try:
            return self.archive.read(member)
        except KeyError:
            return None

    def extract(self, member: str, target: Path) -> None:
        """Copy the member to ``target``, complete or not at all: an interrupted extraction
        leaves only a ``.partial`` file, which the next one overwrites."""
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        with self.archive.open(member) as source, open(partial, "wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
        partial.replace(target)

    def close(self) -> None:
        self.archive.close()
