"""pytest fixtures for SSH test hosts; import them into a test module to use them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import require_tool
from tests.netns.hosts import SshHost, SshKey, free_port, make_key, start_sshd
from tests.netns.require import require_root
from tests.netns.topology import Testbed


@pytest.fixture(scope="session")
def ssh_key(tmp_path_factory: pytest.TempPathFactory) -> SshKey:
    require_tool("ssh-keygen")
    return make_key(tmp_path_factory.mktemp("ssh-key"))


@pytest.fixture(scope="session")
def loopback_host(tmp_path_factory: pytest.TempPathFactory, ssh_key: SshKey) -> Iterator[SshHost]:
    require_tool("sshd", "ssh-keygen")
    host = start_sshd(
        tmp_path_factory.mktemp("sshd-loopback"), "loopback", "127.0.0.1", free_port(), ssh_key
    )
    yield host
    host.stop()


@pytest.fixture(scope="session")
def netns_testbed(tmp_path_factory: pytest.TempPathFactory, ssh_key: SshKey) -> Iterator[Testbed]:
    require_root()
    testbed = Testbed(tmp_path_factory.mktemp("netns"))
    try:
        testbed.create(ssh_key)
        yield testbed
    finally:
        testbed.destroy()
