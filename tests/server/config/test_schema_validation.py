"""The schema validation topic configs: Confluent's names, Redpanda's aliases, strategies."""

from __future__ import annotations

import pytest

from tickwheel.server.config._schema_validation import (
    SCHEMA_VALIDATION_CONFIG_TYPES,
    SubjectNameStrategy,
    TopicSchemaValidation,
    topic_schema_validation,
)

CLASSES = "io.confluent.kafka.serializers.subject."


def test_nothing_set_or_turned_off_validates_nothing() -> None:
    assert topic_schema_validation({}) is None
    assert topic_schema_validation({"retention.ms": "1000"}) is None
    assert topic_schema_validation({"confluent.value.schema.validation": "false"}) is None


def test_confluent_names_take_the_class_names_and_default_to_topic_names() -> None:
    validation = topic_schema_validation(
        {
            "confluent.key.schema.validation": "TRUE",
            "confluent.value.schema.validation": "true",
            "confluent.value.subject.name.strategy": CLASSES + "RecordNameStrategy",
        }
    )
    assert validation == TopicSchemaValidation(
        SubjectNameStrategy.TOPIC, SubjectNameStrategy.RECORD
    )


def test_redpanda_names_are_aliases_with_short_strategy_names() -> None:
    validation = topic_schema_validation(
        {
            "redpanda.value.schema.id.validation": "true",
            "redpanda.value.subject.name.strategy": "TopicRecordNameStrategy",
        }
    )
    assert validation == TopicSchemaValidation(None, SubjectNameStrategy.TOPIC_RECORD)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"confluent.value.schema.validation": "yes"}, "confluent.value.schema.validation"),
        ({"redpanda.key.schema.id.validation": "1"}, "redpanda.key.schema.id.validation"),
        (
            {"confluent.key.subject.name.strategy": "TopicNameStrategy"},
            "confluent.key.subject.name.strategy",
        ),
        (
            {"redpanda.value.subject.name.strategy": CLASSES + "TopicNameStrategy"},
            "redpanda.value.subject.name.strategy",
        ),
        (
            {
                "confluent.value.schema.validation": "true",
                "redpanda.value.schema.id.validation": "true",
            },
            "redpanda.value.schema.id.validation",
        ),
    ],
)
def test_a_bad_value_or_both_names_of_a_setting_is_refused_naming_the_config(
    overrides: dict[str, str], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        topic_schema_validation(overrides)


def test_the_strategies_name_kafkas_subjects() -> None:
    assert SubjectNameStrategy.TOPIC.subject("users", True, None) == "users-key"
    assert SubjectNameStrategy.TOPIC.subject("users", False, "ns.User") == "users-value"
    assert SubjectNameStrategy.RECORD.subject("users", False, "ns.User") == "ns.User"
    assert SubjectNameStrategy.TOPIC_RECORD.subject("users", True, "ns.User") == "users-ns.User"
    assert SubjectNameStrategy.RECORD.subject("users", False, None) is None


def test_every_config_has_its_kafka_type() -> None:
    assert {name: t.name for name, t in SCHEMA_VALIDATION_CONFIG_TYPES.items()} == {
        "confluent.key.schema.validation": "BOOLEAN",
        "confluent.value.schema.validation": "BOOLEAN",
        "redpanda.key.schema.id.validation": "BOOLEAN",
        "redpanda.value.schema.id.validation": "BOOLEAN",
        "confluent.key.subject.name.strategy": "STRING",
        "confluent.value.subject.name.strategy": "STRING",
        "redpanda.key.subject.name.strategy": "STRING",
        "redpanda.value.subject.name.strategy": "STRING",
    }
