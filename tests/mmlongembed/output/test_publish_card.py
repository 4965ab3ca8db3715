"""The dataset card is read by one parser (layout.split_card): validate, the harness and publish
all accept a card whose lines end in \\r\\n, as a card saved on Windows has them."""

from __future__ import annotations

import pytest

from mmlongembed.core.errors import UserError
from mmlongembed.output.layout import configs_from_card, read_card_header, split_card
from mmlongembed.publish.push import load_build, publish
from tests.support.publish_support import REPO, TOKEN, make_pool, write_build

CARD = "---\nconfigs:\n- config_name: pools\n  data_files: data/pools.parquet\npretty_name: T\n---\n# Title\n\nBody.\n"


def windows(text: str) -> str:
    return text.replace("\n", "\r\n")


def test_split_card_reads_the_same_header_whatever_the_line_endings():
    header, body = split_card(CARD, "README.md")
    assert header == {"configs": [{"config_name": "pools", "data_files": "data/pools.parquet"}], "pretty_name": "T"}
    assert body == "# Title\n\nBody.\n"
    windows_header, windows_body = split_card(windows(CARD), "README.md")
    assert windows_header == header and windows_body == windows(body)


def test_split_card_without_a_header_and_with_a_broken_one():
    assert split_card("# Title\n", "README.md") == (None, "# Title\n")
    with pytest.raises(UserError, match="README.md: the YAML header is not a mapping"):
        split_card("---\r\n- a list\r\n---\r\n", "README.md")
    with pytest.raises(UserError, match="README.md: the YAML header does not parse"):
        split_card("---\r\nkey: [unclosed\r\n---\r\n", "README.md")


def test_read_card_header_accepts_windows_line_endings(tmp_path):
    card = tmp_path / "README.md"
    card.write_bytes(windows(CARD).encode("utf-8"))
    assert read_card_header(card)["pretty_name"] == "T"
    assert configs_from_card(card)["pools"].path == "data/pools.parquet"
    card.write_text("# no header\r\n", encoding="utf-8")
    with pytest.raises(UserError, match="has no YAML header"):
        read_card_header(card)


def test_a_card_with_windows_line_endings_is_loaded_and_published(hub, tmp_path):
    root = write_build(tmp_path / "b1", [make_pool("govreport", "easy", "logical_summarization", 3)])
    card = root / "README.md"
    header, _ = split_card(card.read_text(encoding="utf-8"), "README.md")
    card.write_bytes(windows(card.read_text(encoding="utf-8")).encode("utf-8"))
    build = load_build(root)
    assert build.header == header and build.body.startswith("#")
    assert build.pools_path in build.files and [row["pool"] for row in build.pools] == ["govreport-easy-256"]
    result = publish(root, REPO, "1.0.0", endpoint=hub.endpoint, token=TOKEN, log=lambda m: None, wait_s=0.01)
    assert hub.repo(REPO).tags == {"v1.0.0": result.commit}


def test_a_card_on_the_hub_with_windows_line_endings_keeps_its_pools(hub, tmp_path):
    """A card edited on the Hub from Windows: the next release still reads it, so the other task's
    pools it lists stay in the merged card."""
    from huggingface_hub import HfApi

    gov = write_build(tmp_path / "gov", [make_pool("govreport", "easy", "logical_summarization", 2)])
    hotpot = write_build(tmp_path / "hot", [make_pool("hotpot", "easy", "multi_source_reasoning", 2)])
    publish(gov, REPO, "1.0.0", endpoint=hub.endpoint, token=TOKEN, log=lambda m: None, wait_s=0.01)
    card = windows((gov / "README.md").read_text(encoding="utf-8")).encode("utf-8")
    HfApi(endpoint=hub.endpoint, token=TOKEN).upload_file(path_or_fileobj=card, path_in_repo="README.md",
                                                          repo_id=REPO, repo_type="dataset")
    result = publish(hotpot, REPO, "1.1.0", endpoint=hub.endpoint, token=TOKEN, log=lambda m: None, wait_s=0.01)
    merged, _ = split_card(hub.repo(REPO).commits[result.commit].files["README.md"].data.decode(), "README.md")
    names = {entry["config_name"] for entry in merged["configs"]}
    assert {"govreport-easy-256-corpus", "hotpot-easy-256-corpus", "pools"} <= names
