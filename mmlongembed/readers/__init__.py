"""Source readers: one module per source, each turning a source's files (in their original
format) or its Hub rows into the records its builder works on. Reading is what they do, with no
pool logic; where a source's records are only made by a choice (the MMDocIR substitute picks the
non-evidence quotes of each question's context) the reader draws it from a generator derived from
the seed, as every random choice is. Imports ``core``, ``ops``, ``needles`` and ``media``."""
