"""JAAS configuration lines as Kafka writes them in ``sasl.jaas.config``.

Kafka reads ``<LoginModuleClass> <controlFlag> (<option>=<value>)* ;`` with Java's
``StreamTokenizer`` (``JaasConfig``); this parser accepts the same text:

- words are letters, digits and ``. - _ $``; a value may be a word or a string quoted
  with ``"`` or ``'`` (backslash escapes ``\\"``, ``\\\\``, ``\\n``, ``\\t``, ``\\r``);
- ``//`` and ``/* */`` comments are skipped;
- the control flag is ``required``, ``requisite``, ``sufficient`` or ``optional`` in
  any case;
- every entry ends with ``;``, and a line names at least one login module.

A value Java's tokenizer reads as a number (an unquoted ``1234``) is refused as Kafka
refuses it ("Value not specified"): write it quoted.

The options tickwheel reads: ``username`` and ``password`` (this broker's own identity
when it connects to other brokers) and, for ``PlainLoginModule``, ``user_<name>`` (the
password of user ``<name>``).

Concurrency: pure functions over immutable values, safe anywhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_USER_OPTION_PREFIX = "user_"
_WORD_PUNCTUATION = frozenset(".-_$")
_QUOTES = frozenset("\"'")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class JaasError(ValueError):
    """A JAAS configuration that does not parse."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    """One login module: its class, its control flag and its options (passwords among
    them, so out of the repr)."""

    login_module: str
    control_flag: str
    options: Mapping[str, str] = field(default_factory=dict, repr=False)

    def users(self) -> dict[str, str]:
        """The ``user_<name>="<password>"`` options, as name -> password."""
        return {
            key[len(_USER_OPTION_PREFIX) :]: value
            for key, value in self.options.items()
            if key.startswith(_USER_OPTION_PREFIX) and len(key) > len(_USER_OPTION_PREFIX)
        }


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "word", "string", "number" or the punctuation character itself
    text: str


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char in _WORD_PUNCTUATION


def _tokens(text: str) -> Iterator[_Token]:
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char.isspace():
            i += 1
        elif text.startswith("//", i):
            newline = text.find("\n", i)
            i = end if newline < 0 else newline + 1
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            if close < 0:
                raise JaasError("unterminated /* comment in JAAS config")
            i = close + 2
        elif char in _QUOTES:
            value, i = _quoted(text, i)
            yield _Token("string", value)
        elif char.isdigit():
            # Java's tokenizer reads a leading digit as a number, never as a word.
            start = i
            while i < end and (text[i].isdigit() or text[i] == "."):
                i += 1
            yield _Token("number", text[start:i])
        elif _is_word_char(char):
            start = i
            while i < end and _is_word_char(text[i]):
                i += 1
            yield _Token("word", text[start:i])
        else:
            yield _Token(char, char)
            i += 1


def _quoted(text: str, start: int) -> tuple[str, int]:
    quote = text[start]
    chars: list[str] = []
    i = start + 1
    while i < len(text):
        char = text[i]
        if char == quote:
            return "".join(chars), i + 1
        if char == "\n":
            break
        if char == "\\" and i + 1 < len(text):
            i += 1
            chars.append(_ESCAPES.get(text[i], text[i]))
        else:
            chars.append(char)
        i += 1
    raise JaasError("unterminated quoted value in JAAS config")


def parse_jaas_config(text: str) -> tuple[JaasEntry, ...]:
    """The login modules of a ``sasl.jaas.config`` value; ``JaasError`` if malformed."""
    entries: list[JaasEntry] = []
    tokens = _tokens(text)
    for token in tokens:
        if token.kind != "word":
            raise JaasError(f"expected a login module class in JAAS config, got {token.text!r}")
        flag = next(tokens, None)
        if flag is None:
            raise JaasError("Login module control flag not specified in JAAS config")
        if flag.kind != "word" or flag.text.lower() not in CONTROL_FLAGS:
            raise JaasError(f"Invalid login module control flag {flag.text!r} in JAAS config")
        options: dict[str, str] = {}
        for key in tokens:
            if key.kind == ";":
                break
            if key.kind != "word":
                raise JaasError(f"expected an option name in JAAS config, got {key.text!r}")
            equals, value = next(tokens, None), next(tokens, None)
            if (
                equals is None
                or equals.kind != "="
                or value is None
                or value.kind not in ("word", "string")
            ):
                raise JaasError(f"Value not specified for key '{key.text}' in JAAS config")
            options[key.text] = value.text
        else:
            raise JaasError("JAAS config entry not terminated by semi-colon")
        entries.append(JaasEntry(token.text, flag.text.lower(), options))
    if not entries:
        raise JaasError("Login module not specified in JAAS config")
    return tuple(entries)


def single_login_module(text: str) -> JaasEntry:
    """The one login module a listener's or client's ``sasl.jaas.config`` must name."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    return entries[0]
