"""Which rows of a data file go in which row group, in what order: each image stored about once.

A parquet dictionary belongs to a row group, so an image is stored once per row group that places
it, and a row group may hold only so many bytes decoded (``layout.ROW_GROUP_BYTES``: what a reader
holds at a time). Rows in a random order scatter a page over every row group (the real
MMLongBench-Doc build held 3.3x its distinct pages). Here the rows that share images are put in the
same row group:

1. *Units.* The rows of one audit group (a query's positive and the negatives made for it, in one
   pool) are one unit and always share a row group; the rows of each row group are then written in
   a seeded random order, so a row's position inside its group is uniform whatever decided the
   row groups (the blindness audit's row-order rules read exactly that).
2. *Components.* Units that place a common image (a document's windows, in every pool and length
   of the shard) are one component; a component that fits the budget is one block.
3. *A larger component* is cut into blocks greedily: a block grows by the unit with the smallest
   share of bytes it does not already hold, so windows of one document that overlap join the
   same block; a unit that shares nothing starts the next block.
4. *Blocks into row groups*, first fit by decreasing size; the row groups in a seeded random order.

Everything here is a function of the rows, their units and the generator: the same build gives
the same files.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence

from mmlongembed.core.errors import UserError
from mmlongembed.media.page_store import StoredPage
from mmlongembed.output.layout import READ_BACK_LIMIT


def value_bytes(value) -> int:
    """About the bytes ``value`` (a cell: text, bytes, a list of them, a number) takes decoded."""
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-8"))
    if isinstance(value, (list, tuple)):
        return sum(value_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(value_bytes(v) for v in value.values())
    if isinstance(value, StoredPage):  # a stored image: the size of the bytes it stands for
        return len(value)
    return 8


def row_bytes(row: dict) -> int:
    """A row's decoded bytes; a row alone past what Arrow can read back is a UserError
    (``capacity`` refuses such builds before rendering)."""
    n = value_bytes(row)
    if n > READ_BACK_LIMIT:
        raise UserError(f"one row holds {n / 2**30:.2f} GiB, more than a parquet file can be read back with "
                        f"(2 GiB per value); choose shorter --lengths or smaller images")
    return n


def row_group_slices(rows: Sequence[dict], budget: int) -> list[slice]:
    """Consecutive runs of ``rows`` whose decoded bytes stay within ``budget``: the row groups of
    a file whose rows share no image (at least one, for no rows)."""
    slices, start, size = [], 0, 0
    for k, row in enumerate(rows):
        n = row_bytes(row)
        if k > start and size + n > budget:
            slices.append(slice(start, k))
            start, size = k, 0
        size += n
    slices.append(slice(start, len(rows)))
    return slices


class _Units:
    """The rows grouped into units, with each unit's decoded bytes and distinct images."""

    def __init__(self, rows: Sequence[dict], units: Sequence[Hashable], budget: int):
        first: dict[Hashable, int] = {}
        members: list[list[int]] = []
        for k, key in enumerate(units):
            if key not in first:
                first[key] = len(members)
                members.append([])
            members[first[key]].append(k)
        sizes = [row_bytes(row) for row in rows]
        self.rows: list[list[int]] = []
        for unit in members:  # a unit past the budget alone goes in budget-sized runs of its rows
            for part in row_group_slices([rows[k] for k in unit], budget):
                self.rows.append(unit[part])
        self.bytes = [sum(sizes[k] for k in unit) for unit in self.rows]
        self.images: list[dict] = []  # image -> its bytes, in first placement order
        for unit in self.rows:
            images: dict = {}
            for k in unit:
                for image in rows[k].get("images") or ():
                    if image not in images:
                        images[image] = value_bytes(image)
            self.images.append(images)
        self.image_bytes = [sum(images.values()) for images in self.images]

    def components(self) -> list[list[int]]:
        """Units joined by a common image, each component's units in unit order, components in
        the order of their first unit."""
        parent = list(range(len(self.rows)))

        def root(u: int) -> int:
            while parent[u] != u:
                parent[u] = parent[parent[u]]
                u = parent[u]
            return u

        holder: dict = {}
        for u, images in enumerate(self.images):
            for image in images:
                v = holder.setdefault(image, u)
                a, b = root(u), root(v)
                if a != b:
                    parent[max(a, b)] = min(a, b)
        out: dict[int, list[int]] = {}
        for u in range(len(self.rows)):
            out.setdefault(root(u), []).append(u)
        return list(out.values())

    def cut(self, component: list[int], budget: int) -> list[list[int]]:
        """A component past ``budget`` in blocks within it (step 3 of the module docstring)."""
        holders: dict = {}
        for u in component:
            for image in self.images[u]:
                holders.setdefault(image, []).append(u)
        remaining = dict.fromkeys(component)
        blocks = []
        while remaining:
            new = {u: self.image_bytes[u] for u in remaining}  # bytes of u's images not in the block yet
            heap = [(1.0, u) for u in remaining]
            heapq.heapify(heap)
            block, held, used = [], set(), 0
            while heap:
                share, u = heapq.heappop(heap)
                if u not in remaining or share != self._share(new[u], u):
                    continue  # taken, or an outdated entry
                if block and share >= 1.0:
                    break  # nothing left shares an image with this block: the next block starts here
                if block and used + self.bytes[u] > budget:
                    continue  # too large for what is left of this block; smaller sharing units may fit
                block.append(u)
                used += self.bytes[u]
                del remaining[u]
                for image, size in self.images[u].items():
                    if image in held:
                        continue
                    held.add(image)
                    for v in holders[image]:
                        if v in remaining:
                            new[v] -= size
                            heapq.heappush(heap, (self._share(new[v], v), v))
            blocks.append(block)
        return blocks

    def _share(self, new_bytes: int, u: int) -> float:
        """The share of unit ``u``'s image bytes that the block does not hold yet (1.0 when it has
        no image: it shares nothing)."""
        total = self.image_bytes[u]
        return new_bytes / total if total else 1.0


def plan_row_groups(rows: Sequence[dict], units: Sequence[Hashable], rng, budget: int) -> list[list[int]]:
    """The indices of ``rows`` per row group, in written order (see the module docstring).
    ``units[k]`` names row k's unit; rows of a unit share a row group (unless the unit alone is
    past ``budget``); no row group holds more than ``budget`` decoded bytes (unless one row does);
    ``rng`` orders the row groups and the rows inside each."""
    if not rows:
        return [[]]
    table = _Units(rows, units, budget)
    blocks: list[list[int]] = []
    for component in table.components():
        if sum(table.bytes[u] for u in component) <= budget:
            blocks.append(component)
        else:
            blocks += table.cut(component, budget)
    bins: list[list[int]] = []
    room: list[int] = []
    for block in sorted(blocks, key=lambda b: (-sum(table.bytes[u] for u in b), b[0])):
        size = sum(table.bytes[u] for u in block)
        k = next((k for k, free in enumerate(room) if size <= free), None)
        if k is None:
            bins.append([])
            room.append(budget)
            k = len(bins) - 1
        bins[k] += block
        room[k] -= size
    groups = []
    for k in rng.permutation(len(bins)):
        indices = [i for u in bins[int(k)] for i in table.rows[u]]
        groups.append([indices[int(j)] for j in rng.permutation(len(indices))])
    return groups
