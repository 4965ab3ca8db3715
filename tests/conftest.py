"""Fixtures shared by several test modules."""

import pytest

from mmlongembed.hub_server import LoopbackHub
from tests._publish_support import TOKEN, USER


@pytest.fixture()
def hub(monkeypatch):
    """A loopback Hub-compatible server that knows one user's token."""
    # The loopback Hub speaks classic LFS, not Xet; the flag is read at import time, so patch it.
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    with LoopbackHub({TOKEN: USER}) as server:
        yield server
