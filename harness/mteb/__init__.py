"""The harness through mteb: a release's pools as mteb retrieval tasks scored as the paper scores
them (``retrieval``), models as mteb encoders for the video tasks (``video``), and Borda ranking
and Spearman pruning across tasks (``ranking``). Imports ``scoring`` and ``models``.
"""
