"""`mmle push` refuses a build that holds the Hub token (issue 25 §7): it looks for the token as a
token (long enough to be one, not inside a longer word), so that `HF_TOKEN=wrong` is not found in
a card's "wrong", while a real-looking token written into any file, a parquet cell included, is."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mmlongembed.core.errors import UserError
from mmlongembed.publish.push import load_build, publish
from tests.support.publish_support import REPO, TOKEN, make_pool, write_build


@pytest.fixture()
def build(tmp_path):
    return write_build(tmp_path / "b1", [make_pool("govreport", "easy", "logical_summarization", 3)])


def test_a_short_wrong_token_is_not_found_in_the_words_of_a_build(hub, build):
    """HF_TOKEN=wrong: the build's words are no leak; the Hub refuses the token instead."""
    (build / "figures").mkdir(exist_ok=True)
    (build / "figures" / "notes.txt").write_text("no wrong answer is ever marked wrong\n")
    with pytest.raises(UserError) as refused:
        publish(build, REPO, "1.0.0", endpoint=hub.endpoint, token="wrong", log=lambda m: None, wait_s=0.01)
    assert "contains the Hub token" not in str(refused.value)
    assert ("dataset", REPO) not in hub.repos


@pytest.mark.parametrize("written", [f"token={TOKEN}", f"{TOKEN}\n", f'{{"hf": "{TOKEN}"}}', TOKEN])
def test_a_real_looking_token_in_a_file_is_refused(build, written):
    (build / "figures").mkdir(exist_ok=True)
    (build / "figures" / "leak.txt").write_text(written)
    with pytest.raises(UserError, match="figures/leak.txt contains the Hub token"):
        load_build(build, TOKEN)


def test_a_token_in_a_parquet_cell_is_refused(build):
    corpus = next((build / "data" / "govreport" / "corpus").glob("*.parquet"))
    table = pq.read_table(corpus)
    texts = table.column("text").to_pylist()
    texts[0] = f"{texts[0]} {TOKEN} and more text"
    pq.write_table(table.set_column(table.column_names.index("text"), "text", pa.array(texts)), corpus)
    with pytest.raises(UserError, match="contains the Hub token"):
        load_build(build, TOKEN)


def test_the_token_inside_a_longer_word_is_not_the_token(build):
    (build / "figures").mkdir(exist_ok=True)
    for text in (f"x{TOKEN}", f"{TOKEN}x", f"{TOKEN}_2", f"-{TOKEN}"):
        (build / "figures" / "notes.txt").write_text(text)
        assert load_build(build, TOKEN).root == build, text  # not refused
    for text in (f" {TOKEN}.", f"'{TOKEN}'", f"={TOKEN}\n"):
        (build / "figures" / "notes.txt").write_text(text)
        with pytest.raises(UserError, match="figures/notes.txt contains the Hub token"):
            load_build(build, TOKEN)


@pytest.mark.parametrize("chunk", [1, 7, len(TOKEN) - 1, len(TOKEN), len(TOKEN) + 1, 64])
def test_the_scan_in_chunks_finds_what_a_whole_read_finds(tmp_path, monkeypatch, chunk):
    """Read in chunks (memory bounded): a token cut by a chunk's edge is found, and a token
    whose neighbour lies in the next or previous chunk is judged with that neighbour."""
    import mmlongembed.publish.push as publish_module
    from mmlongembed.publish.push import holds_token

    monkeypatch.setattr(publish_module, "SCAN_CHUNK_BYTES", chunk)
    path = tmp_path / "data.bin"
    for before in ("", " ", "a", "z" * 9 + " ", "z" * 10):
        for after in ("", " ", "q", " " + "q" * 9):
            path.write_text(before + TOKEN + after)
            whole = not before[-1:].isalnum() and not after[:1].isalnum()
            assert holds_token(path, TOKEN) is whole, (chunk, before, after)
