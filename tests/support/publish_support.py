"""Shared helpers for the publishing tests: tiny builds, the loopback Hub, client subprocesses.

The Hub clients (`huggingface_hub`, `datasets`) read HF_ENDPOINT when first imported, so whatever
must talk to the loopback server through the clients' defaults (`load_dataset`, the `mmle push`
entry point, MTEB) runs in a subprocess with the environment set; in-process pushes pass the
endpoint explicitly.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from mmlongembed.core.documents import text_document
from mmlongembed.testing import write_fixture_build
from tests.support import fixture_builder  # noqa: F401  (registers the "fixture" builder the builds name)
from mmlongembed.core.pools import Candidate, LengthBand, Pool, Query
from mmlongembed.core.tokens import default_counter
from tests.support.python_env import python_env

TOKEN = "hf_secretTOKENvalue0123456789abcdef"
USER = "alice"
REPO_ROOT = Path(__file__).resolve().parents[2]

TOPICS = ["rivers and floods", "tax policy", "bird migration", "solar panels", "medieval castles",
          "coral reefs", "railway history", "vaccine trials"]


def make_pool(dataset: str, difficulty: str, task: str, n_queries: int, seed: int = 0) -> Pool:
    counter = default_counter()
    band = LengthBand(target=256, lo=1, hi=256)
    pool = Pool(name=f"{dataset}-{difficulty}-{band.name}", task=task, dataset=dataset, difficulty=difficulty,
                band=band, facts={"seed": seed})
    for i in range(n_queries):
        topic = TOPICS[(i + seed) % len(TOPICS)]
        qid = f"{pool.name}-q{i}"
        query_text = f"What does the report say about {topic}?"
        pool.queries.append(Query(id=qid, text=query_text, instruction="Retrieve the matching report.",
                                  source_id=f"src{i}", n_tokens=counter.count(query_text)))
        for role, body in (("positive", f"This report is about {topic}. It explains {topic} in detail."),
                           ("hard_negative", f"This memo is about {TOPICS[i - 1]}. It explains {TOPICS[i - 1]} in detail.")):
            cid = f"{qid}-{role}"
            doc = text_document(cid, body * (1 + seed % 2), counter)
            pool.candidates.append(Candidate(id=cid, document=doc, role=role, group=qid, source_id=f"src{i}",
                                             n_tokens=doc.tokens, provenance={"variant": role}))
        pool.qrels.append((qid, f"{qid}-positive", 1))
    return pool


def write_build(root: Path, pools: list[Pool], title: str = "Test benchmark") -> Path:
    """A build in the published layout, written with the core writer."""
    return write_fixture_build(root, pools, title)


def parquet_hashes(build: Path) -> dict[str, str]:
    """config -> content hash of what was built (same recipe as HASH_LOADED below)."""
    from mmlongembed.output.layout import configs_from_card, read_config

    out = {}
    for name, spec in configs_from_card(build / "README.md").items():
        table = read_config(build, spec)
        rows = [dict(zip(table, values)) for values in zip(*table.values())]
        out[name] = hashlib.sha256(repr(rows).encode()).hexdigest()
    return out


HASH_LOADED = """
import hashlib
def content_hash(ds):
    # The arrow rows as stored, images as their encoded bytes: equal iff the data is equal.
    return hashlib.sha256(repr(ds.data.table.to_pylist()).encode()).hexdigest()
"""


def client_env(hub, tmp: Path, token: str | None = TOKEN) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    env.update({
        "HF_ENDPOINT": hub.endpoint, "HF_HUB_DISABLE_XET": "1", "HF_HOME": str(tmp / "hf_home"),
        "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "MTEB_CACHE": str(tmp / "mteb"),
        "PYTHONPATH": str(REPO_ROOT), "TOKENIZERS_PARALLELISM": "false",
    })
    if token:
        env["HF_TOKEN"] = token
    return env


def run_python(code: str, env: dict, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=python_env(env), capture_output=True,
                          text=True, timeout=timeout)  # in the test's own directory


def run_push_cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    """`mmle push ARGS` through the subcommand's own add_arguments/run (as cli.py wires it)."""
    code = f"""
    import argparse, sys
    from mmlongembed.core.errors import UserError, report_error
    from mmlongembed.publish import push as publish
    from tests.support import fixture_builder
    parser = argparse.ArgumentParser(prog="mmle push")
    publish.add_arguments(parser)
    try:
        sys.exit(publish.run(parser.parse_args({args!r})))
    except UserError as err:
        sys.exit(report_error(err))
    """
    return run_python(code, env)


def load_hashes(repo: str, revision: str, configs: list[str], env: dict) -> dict[str, str]:
    code = HASH_LOADED + f"""
import json, datasets
out = {{}}
for config in {configs!r}:
    ds = datasets.load_dataset({repo!r}, config, split="test", revision={revision!r})
    out[config] = content_hash(ds)
print("HASHES=" + json.dumps(out))
"""
    proc = run_python(code, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("HASHES="))
    return json.loads(line[len("HASHES="):])


REPO = f"{USER}/mmle-bench"
