"""The published layout's storage: an image held by many candidates, in one pool or in pools of
several lengths, is stored once, and `load_dataset` still returns it in every row."""

from __future__ import annotations

from mmlongembed.output.layout import configs_from_card
from mmlongembed.output.writer import plan_shards
from mmlongembed.testing import photo, pool_with_images, write_fixture_build


def test_lengths_that_share_images_share_a_shard_and_text_lengths_do_not():
    shared = [photo(1), photo(2)]
    plan = plan_shards([pool_with_images(256, shared), pool_with_images(512, shared),
                        pool_with_images(1024, [photo(3)]), pool_with_images(256, [], dataset="words"),
                        pool_with_images(512, [], dataset="words")])
    assert [(dataset, name, [p.band.target for p in pools]) for dataset, name, pools in plan] == [
        ("fixture", "256_512", [256, 512]), ("fixture", "1k", [1024]),
        ("words", "256", [256]), ("words", "512", [512])]


def test_an_image_in_many_rows_is_stored_once_and_loads_in_every_row(tmp_path):
    import datasets

    images = [photo(k, side=160) for k in range(3)]
    root = write_fixture_build(tmp_path / "build", [pool_with_images(256, images), pool_with_images(512, images)])
    manifest_storage = sum(len(b) for b in images)
    corpus_files = {spec.path for spec in configs_from_card(root / "README.md").values()
                    if spec.name.endswith("-corpus")}
    assert len(corpus_files) == 1  # both lengths in one shard
    on_disk = sum((root / path).stat().st_size for path in corpus_files)
    assert on_disk < 1.3 * manifest_storage  # 12 candidates x 3 images would be 12x
    for config in ("fixture-easy-256-corpus", "fixture-easy-512-corpus"):
        loaded = datasets.load_dataset(str(root), config, split="test")
        assert len(loaded) == 6 and set(loaded.column_names) == {
            "_id", "title", "text", "images", "n_tokens", "n_text_tokens", "n_image_tokens"}
        for row in loaded:
            assert [im.size for im in row["images"]] == [(160, 160)] * 3
