"""Training-set builds: the pipeline of builders whose output is a training split
(``pipeline``), the tables they write (``tables``), EviAlign's student tokenizer and teacher
(``evialign``), and real MMEB-train pairs from the shared samples (``mmeb_samples``). Imports the
build stage and those below it.
"""

from mmlongembed.core.moved import old_names_from

# `mmlongembed.training` was the training pipeline's module
__getattr__ = old_names_from(__name__, "mmlongembed.training.pipeline")
