"""The zip-member reader the releases' zipped images and videos are read through
(mmlongembed.readers.archives.ZipMembers)."""

import zipfile

import pytest

from mmlongembed.core.errors import UserError
from mmlongembed.readers.archives import ZipMembers


def _archive(path):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("train/a.mp4", b"first a")
        archive.writestr("other/a.mp4", b"second a")
        archive.writestr("__MACOSX/train/._b.mp4", b"resource fork")
        archive.writestr("train/b.mp4", b"b")
    return path


def test_members_are_found_by_path_then_by_file_name_the_first_one_winning(tmp_path):
    members = ZipMembers(_archive(tmp_path / "train.zip"), keep=lambda m: not m.startswith("__MACOSX/"))
    assert members.find("other/a.mp4") == "other/a.mp4"
    assert members.find("a.mp4") == "train/a.mp4"  # by file name: the first member of that name
    assert members.find("missing.mp4", "b.mp4") == "train/b.mp4"  # the first name that is found
    assert members.find("._b.mp4") is None  # not kept
    assert members.read("__MACOSX/train/._b.mp4") == b"resource fork"  # read takes any exact path
    assert members.read("a.mp4") is None  # ... and only an exact path
    members.close()


def test_extraction_is_complete_or_absent(tmp_path):
    members = ZipMembers(_archive(tmp_path / "train.zip"))
    target = tmp_path / "cache" / "train" / "b.mp4"
    target.parent.mkdir(parents=True)
    target.with_name("b.mp4.partial").write_bytes(b"an interrupted extraction")
    members.extract("train/b.mp4", target)
    assert target.read_bytes() == b"b" and not target.with_name("b.mp4.partial").exists()
    members.close()


def test_a_broken_archive_is_one_clear_line(tmp_path):
    broken = tmp_path / "images.zip"
    broken.write_bytes(b"PK not really a zip")
    with pytest.raises(UserError, match=r"images\.zip: not a readable zip archive") as error:
        ZipMembers(broken)
    assert "\n" not in str(error.value)
