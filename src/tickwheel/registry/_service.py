"""``RegistryService``: the schema registry a broker serves on ``schema.registry.listeners``.

It puts the parts together: the ``_schemas`` topic (``SchemasLog``), the registry read
from it (``SchemaRegistry``), its REST API (``RegistryServer``) and the validator the
produce handler checks validated topics' records with (``SchemaValidator``). ``start`` reads the
whole topic (so a restarted broker answers the ids it answered before) and then
listens; ``stop`` closes the listeners and their connections. The broker starts it
after its logs are open and stops it before they close.

Concurrency: event-loop thread only.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from tickwheel.registry._access import RegistryAccess
from tickwheel.registry._http import RegistryListener, RegistryServer
from tickwheel.registry._registry import SchemaRegistry
from tickwheel.registry._schemas_log import SchemasLog
from tickwheel.registry._validator import SchemaValidator
from tickwheel.replica import ReplicaManager


class RegistryService:
    """A registry over this broker's ``_schemas`` partition, served over HTTP."""

    def __init__(
        self,
        listeners: list[RegistryListener],
        replica_manager: ReplicaManager,
        *,
        create_topic: Callable[[], None],
        clock_ms: Callable[[], int],
        write_timeout_ms: int,
        access: RegistryAccess,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        schemas_log = SchemasLog(
            replica_manager,
            create_topic=create_topic,
            clock_ms=clock_ms,
            timeout_ms=write_timeout_ms,
        )
        self.registry = SchemaRegistry(schemas_log)
        self.validator = SchemaValidator(self.registry)
        self._server = RegistryServer(self.registry, listeners, access=access, tls=tls)

    @property
    def ports(self) -> list[int]:
        """The port of each listener, once started."""
        return self._server.ports

    async def start(self) -> None:
        """Read the ``_schemas`` topic, then listen."""
        self.registry.load()
        await self._server.start()

    async def stop(self) -> None:
        """Stop listening and close the connections."""
        await self._server.stop()
