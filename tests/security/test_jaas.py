"""Kafka's JAAS lines as ``sasl.jaas.config`` holds them."""

from __future__ import annotations

import pytest

from tickwheel.security import JaasError, parse_jaas_config, single_login_module
from tickwheel.security._jaas import PLAIN_LOGIN_MODULE

KAFKA_DOCS_LINE = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" '
    'user_alice="alice-secret";'
)


def test_the_line_of_kafkas_documentation() -> None:
    entry = single_login_module(KAFKA_DOCS_LINE)
    assert entry.login_module == PLAIN_LOGIN_MODULE
    assert entry.control_flag == "required"
    assert entry.options["username"] == "admin"
    assert entry.options["password"] == "admin-secret"
    assert entry.users() == {"admin": "admin-secret", "alice": "alice-secret"}


def test_quotes_escapes_comments_and_unquoted_words() -> None:
    text = (
        "/* broker */ org.Module REQUIRED // the flag in any case\n"
        '  a=plain-word_1 b=\'single\' c="with \\"quote\\" and ;,=" d="";'
    )
    (entry,) = parse_jaas_config(text)
    assert entry.control_flag == "required"
    assert dict(entry.options) == {
        "a": "plain-word_1",
        "b": "single",
        "c": 'with "quote" and ;,=',
        "d": "",
    }


def test_two_modules() -> None:
    entries = parse_jaas_config('a.B required; c.D optional x="1";')
    assert [e.login_module for e in entries] == ["a.B", "c.D"]
    with pytest.raises(JaasError, match="2 login modules"):
        single_login_module("a.B required; c.D optional;")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Login module not specified"),
        ("a.B", "control flag not specified"),
        ("a.B maybe;", "Invalid login module control flag"),
        ('a.B required x="1"', "not terminated by semi-colon"),
        ("a.B required x=;", "Value not specified"),
        ("a.B required x=1234;", "Value not specified"),
        ('a.B required x="open;', "unterminated"),
        ("a.B required /* open", "unterminated"),
    ],
)
def test_malformed_lines(text: str, message: str) -> None:
    with pytest.raises(JaasError, match=message):
        parse_jaas_config(text)


def test_the_options_stay_out_of_the_repr() -> None:
    entry = single_login_module(
        f'{PLAIN_LOGIN_MODULE} required username="admin" password="admin-secret" '
        'user_alice="alice-secret";'
    )
    assert entry.users() == {"alice": "alice-secret"}
    assert "secret" not in repr(entry)
