"""Output: the published layout (docs/LAYOUT.md) and everything that writes it. Imports core
and media (the page store).

- ``layout``: config names, columns, where each config's rows live, the card's YAML header;
- ``outdir``: the output folder, written to a temporary place and moved in whole;
- ``writer``: the blind parquet tables (opaque ids, seeded row order), each image stored once;
- ``manifest``: what made a build; ``card``: README.md from cards/; ``croissant``:
  croissant.json; ``disclosure``: licences, known overlaps and the datasheet.
"""

from mmlongembed.core.moved import old_names_from

# `mmlongembed.output` was the writer's module (mmlongembed.output.write_tables, for one release)
__getattr__ = old_names_from(__name__, "mmlongembed.output.writer")
