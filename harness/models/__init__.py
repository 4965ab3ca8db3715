"""Model adapters behind one interface (``adapters``: a pool in, its score matrix out): bm25,
sentence-transformers, transformers, vLLM, the OpenAI-compatible and Doubao APIs, multi-vector late
interaction, the boundary-token readout; the profile runner (``profile_model``, ``profile_loader``)
that runs a model as its authors do; diagnostic rows; tiny random models of the real architectures;
and a fake embeddings server for tests. Imports ``scoring`` and ``profiles``.
"""

from mmlongembed.core.moved import old_names_from

# `harness.models` was the adapters' module
__getattr__ = old_names_from(__name__, "harness.models.adapters")
