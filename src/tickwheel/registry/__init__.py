"""The schema registry: Confluent Schema Registry's REST API, served by the broker.

A room above ``protocol/``, ``log/`` and ``replica/``: the broker starts a
``RegistryService`` when ``schema.registry.listeners`` is set, and the registry keeps
its state in the compacted ``_schemas`` topic, in the records Confluent and Karapace
write, through the same replica layer as every internal topic.

- ``_errors`` -- Confluent's error codes and JSON error body.
- ``_avro`` -- Avro schemas parsed with fastavro; Avro's schema resolution rules.
- ``_compatibility`` -- the seven compatibility levels.
- ``_records`` -- the ``_schemas`` key/value JSON records.
- ``_store`` -- the state those records build.
- ``_schemas_log`` -- the ``_schemas`` partition, appended and read back.
- ``_registry`` -- the registry's operations.
- ``_access`` -- HTTP basic authentication against SCRAM users; the broker's ACLs.
- ``_http`` -- the REST API (aiohttp on the broker's event loop).
- ``_validator`` -- broker-side schema id validation of produced records.
- ``_prefix_scan`` -- the validation's walk over records (compiled: ``_prefix_scan_build``).
- ``_service`` -- the parts put together for the broker.
"""

from tickwheel.registry._access import METHOD_PROPERTY, METHODS, RegistryAccess
from tickwheel.registry._compatibility import Compatibility
from tickwheel.registry._errors import RegistryError
from tickwheel.registry._http import (
    LISTENERS_PROPERTY,
    RegistryListener,
    RegistryListenerError,
    parse_listeners,
)
from tickwheel.registry._records import SCHEMAS_TOPIC
from tickwheel.registry._schemas_log import SCHEMAS_TOPIC_CONFIGS
from tickwheel.registry._service import RegistryService
from tickwheel.registry._validator import SchemaValidator

__all__ = [
    "LISTENERS_PROPERTY",
    "METHODS",
    "METHOD_PROPERTY",
    "SCHEMAS_TOPIC",
    "SCHEMAS_TOPIC_CONFIGS",
    "Compatibility",
    "RegistryAccess",
    "RegistryError",
    "RegistryListener",
    "RegistryListenerError",
    "RegistryService",
    "SchemaValidator",
    "parse_listeners",
]
