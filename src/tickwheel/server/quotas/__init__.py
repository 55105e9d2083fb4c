"""Client quotas (Kafka's ``ClientQuotaManager`` family): configs by entity, the rates
clients are measured by, and the muting of a throttled client's connection.

``ClientQuotas`` (``_manager``) holds the configs and the produce, fetch, request and
controller-mutation managers; ``_entities`` the entities, keys and precedence;
``_rate`` Kafka's sampled rate and throttle time; ``_request_time`` the time a handler
ran (``request_percentage``); ``_channel`` the connection throttle that ``server.net``
waits on. Nothing here imports the rest of ``server``.
"""

from tickwheel.server.quotas._channel import ChannelThrottle, enter_channel, throttle_channel
from tickwheel.server.quotas._entities import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
    QuotaEntityError,
    entity_path,
    find_quota,
    make_entity,
    parse_entity_path,
    quota_text,
    validate_quota,
)
from tickwheel.server.quotas._manager import (
    ClientQuotaManager,
    ClientQuotas,
    ClientUse,
    MutationQuota,
    QuotaWindows,
)
from tickwheel.server.quotas._rate import QUOTA_WINDOW_NUM, QUOTA_WINDOW_SIZE_MS, WindowedRate
from tickwheel.server.quotas._request_time import TimedHandler

__all__ = [
    "CLIENT_ID",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "PRODUCER_BYTE_RATE",
    "QUOTA_KEYS",
    "QUOTA_WINDOW_NUM",
    "QUOTA_WINDOW_SIZE_MS",
    "REQUEST_PERCENTAGE",
    "USER",
    "ChannelThrottle",
    "ClientQuotaManager",
    "ClientQuotas",
    "ClientUse",
    "MutationQuota",
    "QuotaEntity",
    "QuotaEntityError",
    "QuotaWindows",
    "TimedHandler",
    "WindowedRate",
    "enter_channel",
    "entity_path",
    "find_quota",
    "make_entity",
    "parse_entity_path",
    "quota_text",
    "throttle_channel",
    "validate_quota",
]
