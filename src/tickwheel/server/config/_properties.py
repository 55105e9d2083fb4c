"""Java ``.properties`` text, read as ``java.util.Properties.load(Reader)`` reads it.

Kafka's ``server.properties`` is loaded by ``Properties.load``, so a file that Kafka
accepts must mean the same here. The rules, in the order ``load`` applies them:

1. Natural lines end at ``\\n``, ``\\r`` or ``\\r\\n``. A natural line ending in an odd
   number of backslashes continues on the next one: that backslash is dropped, and so
   is the next line's leading whitespace (space, ``\\t``, ``\\f``). A blank line ends
   the logical line even after a continuation.
2. A logical line whose first non-whitespace character is ``#`` or ``!`` is a comment
   (a comment line never continues, whatever it ends with); blank lines are skipped.
3. The key runs from the first non-whitespace character to the first *unescaped*
   ``=``, ``:`` or whitespace. After it, whitespace is skipped, then at most one ``=``
   or ``:``, then whitespace again; the rest of the line is the value, trailing
   whitespace included (``Properties`` keeps it; ``BrokerConfig`` strips it).
4. In keys and values, ``\\t \\n \\r \\f`` and ``\\uXXXX`` are escapes; a backslash
   before any other character stands for that character (``\\=`` is ``=``, ``\\\\`` a
   backslash). A malformed ``\\uXXXX`` raises ``PropertiesSyntaxError``, as Java's
   ``IllegalArgumentException``. UTF-16 surrogate pairs written as two ``\\u`` escapes
   become one character.
5. A later line with the same key replaces the earlier one.

``format_properties`` writes text that ``parse_properties`` reads back unchanged
(``Properties.store``'s escaping, with non-ASCII characters left as UTF-8).

Pure functions on strings; safe from any thread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_WHITESPACE = " \t\f"
_SEPARATORS = "=:"
_COMMENT_MARKERS = "#!"
_NATURAL_LINE_END = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_UNICODE_ESCAPE_DIGITS = 4
_HEX_BASE = 16
# Properties.store escapes these anywhere in a key or value (its saveConvert).
_STORE_ESCAPES = {
    "\\": "\\\\",
    "\t": "\\t",
    "\n": "\\n",
    "\r": "\\r",
    "\f": "\\f",
    "=": "\\=",
    ":": "\\:",
    "#": "\\#",
    "!": "\\!",
}
_FIRST_PRINTABLE = 0x20
_DELETE = 0x7F


class PropertiesSyntaxError(ValueError):
    """Text that ``Properties.load`` would refuse (a malformed ``\\uXXXX``)."""


def parse_properties(text: str) -> dict[str, str]:
    """The key/value pairs of ``.properties`` text, in file order (later keys win)."""
    properties: dict[str, str] = {}
    for line in _logical_lines(text):
        key_end = _key_end(line)
        value_start = _skip(line, key_end, _WHITESPACE)
        if value_start < len(line) and line[value_start] in _SEPARATORS:
            value_start = _skip(line, value_start + 1, _WHITESPACE)
        properties[_unescape(line[:key_end])] = _unescape(line[value_start:])
    return properties


def _logical_lines(text: str) -> list[str]:
    """Logical lines with leading whitespace gone, comments and blank lines dropped;
    escapes are still in place (only continuation backslashes are removed)."""
    lines: list[str] = []
    pending: str | None = None  # a logical line that continues on the next natural one
    for natural in _NATURAL_LINE_END.split(text):
        stripped = natural.lstrip(_WHITESPACE)
        if pending is None and (not stripped or stripped[0] in _COMMENT_MARKERS):
            continue
        joined = stripped if pending is None else pending + stripped
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            pending = joined[:-1]
            continue
        pending = None
        lines.append(joined)
    if pending is not None:  # the text ended on a continuation: Java keeps the line
        lines.append(pending)
    return lines


def _key_end(line: str) -> int:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2  # the escaped character belongs to the key
            continue
        if char in _SEPARATORS or char in _WHITESPACE:
            return index
        index += 1
    return len(line)


def _skip(line: str, index: int, chars: str) -> int:
    while index < len(line) and line[index] in chars:
        index += 1
    return index


def _unescape(escaped: str) -> str:
    if "\\" not in escaped:
        return escaped
    out: list[str] = []
    index = 0
    while index < len(escaped):
        char = escaped[index]
        index += 1
        if char != "\\" or index == len(escaped):
            # A lone trailing backslash cannot reach here (it continued the line and was
            # dropped); it is kept as itself rather than lost.
            out.append(char)
            continue
        code = escaped[index]
        index += 1
        if code == "u":
            digits = escaped[index : index + _UNICODE_ESCAPE_DIGITS]
            if len(digits) < _UNICODE_ESCAPE_DIGITS or not all(
                d in "0123456789abcdefABCDEF" for d in digits
            ):
                raise PropertiesSyntaxError(f"malformed \\uxxxx encoding in {escaped!r}")
            out.append(chr(int(digits, _HEX_BASE)))
            index += _UNICODE_ESCAPE_DIGITS
        else:
            out.append(_ESCAPES.get(code, code))
    joined = "".join(out)
    # Two \u escapes may spell one UTF-16 surrogate pair (Properties.store writes
    # characters outside the BMP that way): join them into one character.
    return joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def format_properties(properties: Mapping[str, str]) -> str:
    """``.properties`` text for ``properties``, one ``key=value`` line each."""
    return "".join(
        f"{_escape(key, escape_all_spaces=True)}={_escape(value, escape_all_spaces=False)}\n"
        for key, value in properties.items()
    )


def _escape(text: str, *, escape_all_spaces: bool) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        if char == " " and (escape_all_spaces or index == 0):
            out.append("\\ ")  # a key's spaces end it; a value's leading ones are skipped
        elif char in _STORE_ESCAPES:
            out.append(_STORE_ESCAPES[char])
        elif ord(char) < _FIRST_PRINTABLE or ord(char) == _DELETE or _is_surrogate(char):
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def _is_surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udfff"
