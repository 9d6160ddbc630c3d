from __future__ import annotations

from pathlib import Path

import pytest

from agent.site import build_site
from tests.agent.h3_peers import Credentials, make_credentials

# Small enough that a 256-byte window fetch stays quick, big enough to need many windows.
TEST_SITE_BYTES = 600_000


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    build_site(root, seed=7, total_bytes=TEST_SITE_BYTES)
    return root


@pytest.fixture(scope="session")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> Credentials:
    """A certificate authority and a server certificate for 127.0.0.1, for TLS and QUIC."""
    return make_credentials(tmp_path_factory.mktemp("tls"))
