"""`mmle audit`: the build's label-free shortcut audit, for retrieval datasets this toolkit did not
build (BEIR, mteb's Hub layout) and for its own releases. ``sources`` reads them, ``battery``
runs the rules of ``mmlongembed.checks.shortcuts`` and the baselines, ``cli`` reports."""
