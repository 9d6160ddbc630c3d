"""Reusable SSH test hosts: real sshd on 127.0.0.1, or inside network namespaces.

Use the pytest fixtures of `tests.netns.fixtures` by naming that module as a plugin in the
test module (no conftest needed, and no unused imports):

    pytest_plugins = ["tests.netns.fixtures"]

- `ssh_key` (session): an ed25519 client key pair (`SshKey`) every test sshd authorizes.
- `loopback_host` (session): an `SshHost` served by sshd on 127.0.0.1 at a free port (no root).
- `netns_testbed` (session, root): a `Testbed` of two namespaces, `client` and `server`, each
  running sshd on its control address (a bridge in the root namespace reaches both, so the
  controller stays in the root namespace), joined by a direct veth data link (`data0` in each);
  no default route, so nothing leaves the machine.

Every `SshHost` has its own known_hosts file, its own home directory (sshd sets `HOME` for its
sessions, so `~` differs per host although namespaces share the filesystem) and its own log.
Teardown kills what runs in each namespace, then each sshd by its pidfile, then deletes the
namespaces and the bridge: deleting a namespace with a process inside would only hide it.

Tests that need root call `require_root()`: it skips outside CI and fails in CI (like
`tests.conftest.require_tool`).
"""

from __future__ import annotations

from tests.netns.hosts import SshHost, SshKey
from tests.netns.require import require_root
from tests.netns.topology import Testbed

__all__ = ["SshHost", "SshKey", "Testbed", "require_root"]
