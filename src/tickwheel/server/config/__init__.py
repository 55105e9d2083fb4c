"""The broker's configuration: Kafka's ``server.properties`` names, read, checked and changed.

``BrokerConfig`` (``_broker``) holds every setting under its Kafka name, checked when it is
built (a bad value is a ``ConfigError`` naming the property); ``parse_properties``
(``_properties``) reads Java's ``.properties`` text and ``parse_overrides`` the
command line's ``NAME=VALUE`` pairs. Named listeners and their security protocols are
``_listeners``; settings changed at run time (DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs) are ``_dynamic`` and ``_admin``; per-group overrides of the
group settings are ``_groups``; the topic configs of broker-side schema id validation
(Confluent's and Redpanda's names) are ``_schema_validation``.

Concurrency: a ``BrokerConfig`` is frozen; the dynamic configs live on the broker's
event loop (see each module).
"""
