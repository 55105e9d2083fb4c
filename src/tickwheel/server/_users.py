"""``UserConfigs``: users' configs -- their SCRAM credentials -- where they are kept.

Every SCRAM login looks its credential up in ``credentials`` (a ``ScramCredentials``);
AlterUserScramCredentials changes it through ``alter``. Where a change is kept:

- on a single node, in ``tickwheel-users.json`` in the first log directory, rewritten
  atomically (temporary file, fsync, rename; mode 0600) at each change and read at
  start-up, so users survive a restart. The file holds each user's config as Kafka
  keeps it in ZooKeeper (mechanism name -> ``salt=..,stored_key=..,server_key=..,
  iterations=..``): salted keys, never a password. The file is written first and the
  change applied in memory after, so a failed write leaves the old credential working.
- in a cluster, in ZooKeeper at ``/config/users/<user>`` with a change notification
  (``use_cluster`` hands over the writer, ``ClusterNode.alter_config``): every broker,
  this one included, takes the change through ``apply`` when notified, and ``alter``
  returns once this broker has.

Concurrency: the broker's event loop only; the file is written on a worker thread
(``asyncio.to_thread``), one change at a time (a lock), so no write loses another's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from tickwheel.security import ScramCredentials
from tickwheel.server.config._broker import ConfigError

_log = logging.getLogger(__name__)

USERS_FILE = "tickwheel-users.json"
_FORMAT_VERSION = 1
_FILE_MODE = 0o600
"""Owner only: the file holds salted keys, which let anyone holding them log in."""

ClusterWriter = Callable[[str, Mapping[str, str]], Awaitable[None]]
"""(user, new config) -> written to ZooKeeper and applied here."""


class UserConfigError(ConfigError):
    """The users file cannot be read: the broker does not start (a ``ConfigError``)."""


class UserConfigs:
    """Users' configs and their SCRAM credentials, kept in a file or in ZooKeeper."""

    def __init__(self, log_dir: Path) -> None:
        self.credentials = ScramCredentials()
        self._path = log_dir / USERS_FILE
        self._cluster_writer: ClusterWriter | None = None
        self._file_lock = asyncio.Lock()

    def load(self) -> None:
        """Read the single node's users file, if there is one."""
        if not self._path.exists():
            return
        try:
            data = json.loads(self._path.read_text(encoding="utf-8"))
            users = data["users"]
            if not isinstance(users, dict):
                raise TypeError("users is not an object")
            configs_by_user = {
                str(user): {str(name): str(value) for name, value in configs.items()}
                for user, configs in users.items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UserConfigError(f"cannot read the users file {self._path}: {exc}") from exc
        self.credentials.replace_all(configs_by_user)

    def use_cluster(self, writer: ClusterWriter) -> None:
        """Keep changes in ZooKeeper through ``writer`` from now on (cluster mode)."""
        self._cluster_writer = writer

    async def alter(self, user: str, configs: Mapping[str, str]) -> None:
        """Replace ``user``'s config (empty: remove the user) where it is kept."""
        if self._cluster_writer is not None:
            await self._cluster_writer(user, configs)
            return
        async with self._file_lock:
            all_configs = self.credentials.all_configs()
            if configs:
                all_configs[user] = dict(configs)
            else:
                all_configs.pop(user, None)
            await asyncio.to_thread(self._save, all_configs)
            self.apply(user, configs)

    def apply(self, user: str, configs: Mapping[str, str]) -> None:
        """Take ``user``'s new config (from ZooKeeper, or a local change)."""
        self.credentials.set_configs(user, configs)
        _log.info(
            "user %s: SCRAM credentials now %s",
            user,
            sorted(k for k in configs if k.startswith("SCRAM-")) or "none",
        )

    def _save(self, all_configs: Mapping[str, Mapping[str, str]]) -> None:
        """Replace the file with ``all_configs`` (on a worker thread)."""
        data = {"version": _FORMAT_VERSION, "users": all_configs}
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, _FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            os.fchmod(fd, _FILE_MODE)
            json.dump(data, out, indent=1, sort_keys=True)
            out.flush()
            os.fsync(fd)
        tmp.replace(self._path)
