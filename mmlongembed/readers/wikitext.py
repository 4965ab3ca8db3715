"""WikiText (Merity et al., 2016) raw text as whole articles: from local raw files (WikiText-2 or
-103 ``*.raw``, or ``*.txt``) or from the Hub's rows, one line a row.

An article is its title line, then its section headings and paragraphs, each paragraph followed
by a blank line; WikiText's spacing around punctuation and its @-@ escapes are undone.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from mmlongembed.core.builder import BuildReport
from mmlongembed.readers.sources import read_text_file
from mmlongembed.core.text import normalise_newlines

_WIKITEXT_TITLE = re.compile(r"^ = ([^=].*?) = $")
_WIKITEXT_HEADING = re.compile(r"^ (?:= )+(.*?) (?:= )+$|^ =(?: =)+ (.*?) =(?: =)+ $")
_DETOKENIZE = [(re.compile(p), r) for p, r in (
    (r" @(.)@ ", r"\1"), (r" ([,.;:!?%)\]}])", r"\1"), (r"([(\[{$]) ", r"\1"), (r" (n't|'s|'re|'ve|'m|'ll|'d)\b", r"\1"),
)]


def detokenize_wikitext(line: str) -> str:
    """Undo WikiText's spacing around punctuation and its @-@ escapes (plain text reads better)."""
    for pattern, replacement in _DETOKENIZE:
        line = pattern.sub(replacement, line)
    return line.strip()


def is_article_title(line: str) -> bool:
    """Whether a raw line (its newline aside) opens an article: `` = Title = `` (a section
    heading has two or more ``=``)."""
    return bool(_WIKITEXT_TITLE.match(line)) and not line.startswith(" = =")


def wikitext_articles(raw: str, prefix: str) -> list[tuple[str, str]]:
    """WikiText raw text -> (id, article) pairs. Each article is its title line, then section
    headings and paragraphs, each paragraph followed by a blank line."""
    articles: list[tuple[str, list[str]]] = []
    for line in normalise_newlines(raw).split("\n"):
        if not line.strip():
            continue
        title = _WIKITEXT_TITLE.match(line)
        if title and not line.startswith(" = ="):
            articles.append((detokenize_wikitext(title.group(1)), []))
            continue
        if not articles:
            continue
        heading = _WIKITEXT_HEADING.match(line)
        if heading:
            articles[-1][1].append(detokenize_wikitext(heading.group(1) or heading.group(2) or "") + "\n")
        else:
            articles[-1][1].append(detokenize_wikitext(line) + "\n\n")
    out = []
    for number, (title, parts) in enumerate(articles):
        body = "".join(parts)
        if body.strip():
            out.append((f"{prefix}:{number}:{title}", f"{title}\n{body}"))
    return out


def wikitext_files(root: Path) -> list[Path]:
    """The raw files of a local WikiText copy: ``root`` itself if it is a file, else its *.raw
    files, then its *.txt files (each sorted)."""
    return [root] if root.is_file() else sorted(root.rglob("*.raw")) + sorted(root.rglob("*.txt"))


def read_wikitext_files(root: Path, report: BuildReport) -> list[tuple[str, str]]:
    """The articles of every file of ``wikitext_files(root)``, each article's id prefixed with its
    file's stem (a file that is not UTF-8 is counted and passed over: ``read_text_file``)."""
    articles: list[tuple[str, str]] = []
    for path in wikitext_files(root):
        raw = read_text_file(path, report)
        if raw is not None:
            articles.extend(wikitext_articles(raw, path.stem))
    return articles


def wikitext_rows_articles(rows: Iterable[dict], prefix: str, limit: int) -> list[tuple[str, str]]:
    """The first ``limit`` articles of the Hub's WikiText rows (one raw line a row, in ``text``),
    read only as far as they are needed."""
    lines, articles = [], []
    for row in rows:
        line = row.get("text", "")
        if is_article_title(line.rstrip("\n")) and lines:
            articles.extend(wikitext_articles("".join(lines), prefix))
            lines = []
            if len(articles) >= limit:
                break
        lines.append(line)
    return articles[:limit]
