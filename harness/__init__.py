"""The scoring harness: load a built benchmark through `datasets.load_dataset`, embed, score, report.

It never imports builder code: the published layout (docs/LAYOUT.md) is the only contract.
"""
