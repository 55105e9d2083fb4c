"""Settings dataclasses read from Kafka's dotted property names.

The coordinators' and the share layer's settings are frozen dataclasses whose field
names are Kafka's property names with dots as underscores
(``transaction_max_timeout_ms`` is ``transaction.max.timeout.ms``) and whose values are
whole numbers; ``int_settings`` picks their values out of a broker's properties.

Pure function; safe from any thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


def int_settings(cls: Any, properties: Mapping[str, str]) -> dict[str, int]:
    """The fields of dataclass ``cls`` that ``properties`` set, as integers by field name;
    other properties are ignored. ValueError names a value that is not an integer."""
    values: dict[str, int] = {}
    for config_field in dataclasses.fields(cls):
        name = config_field.name.replace("_", ".")
        if name in properties:
            try:
                values[config_field.name] = int(properties[name])
            except ValueError as error:
                raise ValueError(f"{name} must be an integer: {properties[name]!r}") from error
    return values
