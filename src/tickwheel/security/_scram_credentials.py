"""``ScramCredentials``: every user's SCRAM credentials as this broker knows them.

A user's credentials travel as Kafka keeps them in a user's config (``/config/users/
<user>`` in ZooKeeper): a map from the mechanism name to the credential's text
(``salt=..,stored_key=..,server_key=..,iterations=..``); other keys of that map (Kafka's
client quotas) are kept as they are and otherwise ignored. The store holds the parsed
credentials, which the SCRAM server looks up at each authentication, and the configs
as given, which the admin APIs describe and alter. Where they are kept is the
server's business: a file in the first log directory on a single node, ZooKeeper in a
cluster (every broker's store is updated from the change notification).

A stored credential that does not parse is logged and left out, never fatal: the
user cannot authenticate with that mechanism until it is set again.

Concurrency: event-loop thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from tickwheel.security._scram import (
    SCRAM_MECHANISMS,
    ScramCredential,
    ScramError,
    credential_from_string,
)

_log = logging.getLogger(__name__)


class ScramCredentials:
    """Users' configs (SCRAM credentials among them), by user name."""

    def __init__(self) -> None:
        self._configs: dict[str, dict[str, str]] = {}
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    def lookup(self, username: str, mechanism: str) -> ScramCredential | None:
        """The credential of ``username`` for ``mechanism``, or None."""
        return self._credentials.get((username, mechanism))

    def configs(self, username: str) -> dict[str, str]:
        """A copy of ``username``'s config (empty if none)."""
        return dict(self._configs.get(username, {}))

    def all_configs(self) -> dict[str, dict[str, str]]:
        """A copy of every user's config."""
        return {user: dict(configs) for user, configs in self._configs.items()}

    def set_configs(self, username: str, configs: Mapping[str, str]) -> None:
        """Replace ``username``'s config (empty: forget the user)."""
        for mechanism in SCRAM_MECHANISMS:
            self._credentials.pop((username, mechanism), None)
        if not configs:
            self._configs.pop(username, None)
            return
        self._configs[username] = dict(configs)
        for mechanism in SCRAM_MECHANISMS:
            text = configs.get(mechanism)
            if text is None:
                continue
            try:
                self._credentials[(username, mechanism)] = credential_from_string(text)
            except ScramError as exc:
                _log.error("ignoring the %s credential of user %s: %s", mechanism, username, exc)

    def replace_all(self, configs_by_user: Mapping[str, Mapping[str, str]]) -> None:
        """Forget every user, then take ``configs_by_user``."""
        self._configs.clear()
        self._credentials.clear()
        for username, configs in configs_by_user.items():
            self.set_configs(username, configs)
