"""The harness's fixture benchmarks live in the package (harness.fixtures), so that bench/ scripts
use them without importing the tests."""

from __future__ import annotations

import subprocess
import sys

from tests.support.realdata import REPO_ROOT
from tests.support.python_env import python_env
from tests.test_import_graph import import_graph


def test_bench_scripts_import_nothing_from_the_tests():
    graph = import_graph(REPO_ROOT, ("bench", "tests"))
    assert {(script, module) for script, targets in graph.items() if script.startswith("bench.")
            for module in targets if module.startswith("tests")} == set()


def test_the_throughput_benchmark_starts(tmp_path):
    script = REPO_ROOT / "bench" / "harness_throughput.py"
    proc = subprocess.run([sys.executable, str(script), "--help"], cwd=tmp_path, env=python_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--candidates-words" in proc.stdout


def test_a_fixture_pool_has_its_positive_and_negatives_per_query():
    from harness.fixtures import make_pool

    pool = make_pool("govreport-easy-256", n_queries=2, negatives=3, words=40)
    assert [q.id for q in pool.queries] == ["govreport-easy-256-q0", "govreport-easy-256-q1"]
    assert [c.role for c in pool.candidates if c.group == "govreport-easy-256-q0"] == \
        ["positive", "hard_negative", "easy_negative", "easy_negative"]
    assert pool.qrels == [("govreport-easy-256-q0", "govreport-easy-256-q0-c0", 1),
                          ("govreport-easy-256-q1", "govreport-easy-256-q1-c0", 1)]
