"""Generated MMLongBench sources for tests and the builder's example build (private: the
registry scan skips it): made-up reports as PDFs in MMLongBench-Doc's layout."""

from __future__ import annotations

import json
from pathlib import Path

from mmlongembed.core.rng import derive_rng
from mmlongembed.testing import mark_synthetic, paged_document_spec, write_pdf


def write_paged_sources(root: Path, n_documents: int = 8, pages=(14, 22), seed: int = 5,
                        sidecar: int = 1) -> dict[str, list[dict]]:
    """PDFs in MMLongBench-Doc's layout (``mmlongbench_doc/documents/*.pdf`` + ``samples.jsonl``);
    the first ``sidecar`` documents also get a summary sidecar (``<name>.json``). One document
    mixes page sizes. Returns name -> page specs (with each element's box)."""
    rng = derive_rng(seed, "paged-fixture")
    base = Path(root) / "mmlongbench_doc"
    mark_synthetic(root)
    out = {}
    with_samples = []
    for d in range(n_documents):
        name = f"report{d:02d}.pdf"
        n_pages = int(rng.integers(pages[0], pages[1] + 1))
        spec = paged_document_spec(rng, d, n_pages, other_size_every=5 if d == n_documents - 1 else 0)
        write_pdf(base / "documents" / name, spec)
        out[name] = spec
        if d < sidecar:
            summary = " ".join(line[3] for page in spec[:3] for line in page["lines"][:2])
            (base / "documents" / f"report{d:02d}.json").write_text(json.dumps({"summary": summary}), encoding="utf-8")
        else:
            with_samples.append(name)
    with open(base / "samples.jsonl", "w", encoding="utf-8") as handle:
        for name in with_samples:
            handle.write(json.dumps({"doc_id": name, "doc_type": "Research report", "question": "What is shown?",
                                     "answer": "Not answerable", "evidence_pages": "[]", "evidence_sources": "[]",
                                     "answer_format": "None"}) + "\n")
    return out
