"""The ``.properties`` reader: the examples of ``java.util.Properties.load``'s
documentation, its edge cases, and a round trip through ``format_properties``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.server.config._properties import (
    PropertiesSyntaxError,
    format_properties,
    parse_properties,
)


@pytest.mark.parametrize(
    "line", ["Truth = Beauty", "  Truth:Beauty", "Truth                    :Beauty"]
)
def test_documentation_separators(line: str) -> None:
    # "each of the following lines specifies the key "Truth" and the value "Beauty""
    assert parse_properties(line) == {"Truth": "Beauty"}


def test_documentation_continuation() -> None:
    text = (
        "fruits                           apple, banana, pear, \\\n"
        "                                  cantaloupe, watermelon, \\\n"
        "                                  kiwi, mango\n"
    )
    assert parse_properties(text) == {
        "fruits": "apple, banana, pear, cantaloupe, watermelon, kiwi, mango"
    }


def test_documentation_key_without_value() -> None:
    assert parse_properties("cheeses\n") == {"cheeses": ""}


def test_documentation_escaped_separators_belong_to_the_key() -> None:
    assert parse_properties("\\:\\=\n") == {":=": ""}
    assert parse_properties("key\\ with\\ spaces = v") == {"key with spaces": "v"}


def test_whitespace_separator_as_kafka_files_may_use() -> None:
    assert parse_properties("num.partitions 3\nlog.dirs\t/data") == {
        "num.partitions": "3",
        "log.dirs": "/data",
    }


def test_only_the_first_separator_counts_and_one_is_skipped() -> None:
    assert parse_properties("a = = b") == {"a": "= b"}
    assert parse_properties("a:b=c") == {"a": "b=c"}
    assert parse_properties("a  b c") == {"a": "b c"}


def test_comments_and_blank_lines() -> None:
    text = "# comment\n   ! bang comment \\\nkey=value\n\n \t\f\n"
    # A comment line never continues, even when it ends in a backslash.
    assert parse_properties(text) == {"key": "value"}


def test_escapes() -> None:
    text = "k=\\t\\n\\r\\f\\\\\\u0041\\q\\#"
    assert parse_properties(text) == {"k": "\t\n\r\f\\Aq#"}


def test_surrogate_pair_escapes_make_one_character() -> None:
    assert parse_properties("k=\\uD83D\\uDE00") == {"k": "\U0001f600"}


def test_malformed_unicode_escape_is_refused() -> None:
    with pytest.raises(PropertiesSyntaxError):
        parse_properties("k=\\u12G4")


def test_even_backslashes_do_not_continue() -> None:
    assert parse_properties("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}
    assert parse_properties("a=x\\\\\\\n  y") == {"a": "x\\y"}


def test_line_terminators_and_trailing_whitespace() -> None:
    text = "a=1  \r\nb=2\rc=\\\r\n   3"
    assert parse_properties(text) == {"a": "1  ", "b": "2", "c": "3"}


def test_continuation_at_end_of_text_and_before_a_blank_line() -> None:
    assert parse_properties("a=1\\") == {"a": "1"}
    assert parse_properties("a=1\\\n\nb=2") == {"a": "1", "b": "2"}


def test_later_keys_win() -> None:
    assert parse_properties("a=1\na=2") == {"a": "2"}


@given(st.dictionaries(st.text(), st.text(), max_size=5))
def test_round_trip(properties: dict[str, str]) -> None:
    assert parse_properties(format_properties(properties)) == properties
