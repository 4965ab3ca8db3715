"""The document-summary step: an ordered run of pages' text layer -> one summary (the query of
Logical Summarization on page images when the source ships no summary, as MMLongBench-Doc).

``--llm none`` has no summary to give; it writes a *synthetic query* instead: the opening words
of every page's text layer, in page order, behind a label that says what it is. It exists so the
whole pipeline runs in tests and CI; a release must use an LLM (the card says which was used).
"""

from __future__ import annotations

from typing import Sequence

from mmlongembed.core.builder import BuildReport
from mmlongembed.llm.config import LLMConfig
from mmlongembed.llm.prompts import load_prompt
from mmlongembed.llm.runner import run_llm_step, step_record
from mmlongembed.core.text import split_sentences

DOCUMENT_SUMMARY = "document_summary"
SYNTHETIC_QUERY = "text-layer opening words v1 (no LLM; tests only)"
SYNTHETIC_LABEL = "Synthetic query (text layer, no LLM; for tests only):"
WORDS_PER_PAGE = 16


SYNTHETIC_QUERY_SOURCE = "synthetic_text_layer"  # the query source of --llm none stand-ins

def pages_prompt_text(pages: Sequence[str], max_chars: int) -> str:
    """The pages for the prompt, each under a 'Page k' line; every page keeps an equal share of
    ``max_chars`` (its head), so the end of a long run is represented as well as its start."""
    share = max(200, max_chars // max(1, len(pages)))
    parts = []
    for k, text in enumerate(pages, 1):
        body = " ".join(text.split())
        if len(body) > share:
            body = body[:share].rsplit(" ", 1)[0] + " ..."
        parts.append(f"Page {k}:\n{body or '(no text layer)'}")
    return "\n\n".join(parts)


def synthetic_query(pages: Sequence[str], words_per_page: int = WORDS_PER_PAGE) -> str:
    """The labelled stand-in for a summary: the first sentence (at most ``words_per_page``
    words) of every page that has a text layer, in page order. Empty when no page has text."""
    openings = []
    for text in pages:
        body = " ".join(text.split())
        if not body:
            continue
        first = split_sentences(body)[0].strip()
        words = first.split()[:words_per_page]
        openings.append(" ".join(words).rstrip(".,;:") + ".")
    return f"{SYNTHETIC_LABEL} " + " ".join(openings) if openings else ""


def summarise_documents(items: Sequence[tuple[str, Sequence[str]]], config: LLMConfig, report: BuildReport,
                        max_chars: int = 24000, **overrides) -> tuple[dict[str, str], str]:
    """(record id, page texts in order) -> (record id -> summary, query source). Records the
    step in ``report.llm_steps``; unusable replies are counted skips (``document_summary:*``)."""
    prompt = load_prompt(DOCUMENT_SUMMARY)
    if config.llm == "none":
        out = {}
        for rid, pages in items:
            query = synthetic_query(pages)
            if query:
                out[rid] = query
            else:
                report.skip(f"{DOCUMENT_SUMMARY}:no_text_layer", rid)
        record = step_record(DOCUMENT_SUMMARY, prompt, "none", SYNTHETIC_QUERY, "", records=len(items),
                             answered=len(out), rejected={}, calls=0, cache_hits=0)
        record["prompt_hash"] = "fallback (no prompt)"
        report.llm_steps.append(record)
        return out, SYNTHETIC_QUERY_SOURCE
    result = run_llm_step(DOCUMENT_SUMMARY, prompt,
                          [(rid, {"pages": pages_prompt_text(pages, max_chars)}) for rid, pages in items],
                          config, report, **overrides)
    return {rid: str(v) for rid, v in result.values.items()}, "llm_summary"
