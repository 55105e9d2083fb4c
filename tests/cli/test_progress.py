"""The stderr spinner of the admin verbs: silent for short waits and off a terminal,
drawn and then wiped for a long one.

Its delays are shortened here; a test that checks nothing is drawn waits well past
the shortened delay, since there is no event for "nothing happened".
"""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Callable, Iterator

import pytest

from tickwheel.cli import _client, _progress, main
from tickwheel.cli._progress import configure, progress

DEADLINE_S = 10.0


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _fast_spinner(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_progress, "DELAY_S", 0.05)
    monkeypatch.setattr(_progress, "FRAME_S", 0.01)
    yield
    configure(None)


def _poll(check: Callable[[], bool]) -> None:
    """Return once ``check()`` holds; fail after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, "the spinner never drew"
        time.sleep(0.005)


def test_a_short_wait_on_a_terminal_prints_nothing() -> None:
    stream = _Terminal()
    configure(None)
    with progress("waiting", stream=stream):
        pass
    assert stream.getvalue() == ""


def test_a_long_wait_on_a_terminal_draws_then_wipes_its_line() -> None:
    stream = _Terminal()
    configure(None)
    with progress("waiting for the broker", stream=stream):
        _poll(lambda: "waiting for the broker" in stream.getvalue())
    text = stream.getvalue()
    assert text.startswith("\r")
    *_, wipe, after = text.rsplit("\r", 2)
    assert wipe.strip() == ""  # the last line drawn is blanks ...
    assert after == ""  # ... and the cursor is back at column 0


def test_off_a_terminal_it_is_silent_unless_forced() -> None:
    stream = io.StringIO()
    configure(None)
    with progress("waiting", stream=stream):
        time.sleep(0.2)  # well past the (shortened) delay: the spinner would have drawn
    assert stream.getvalue() == ""

    configure(True)
    with progress("waiting", stream=stream):
        _poll(lambda: "waiting" in stream.getvalue())
    assert "waiting" in stream.getvalue()


def test_no_progress_silences_a_terminal() -> None:
    stream = _Terminal()
    configure(False)
    with progress("waiting", stream=stream):
        time.sleep(0.2)
    assert stream.getvalue() == ""


def test_an_admin_verb_spins_on_stderr_and_keeps_json_stdout_clean(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_client, "TIMEOUT_S", 0.5)  # no broker answers: the wait times out
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nobody = f"127.0.0.1:{closed.getsockname()[1]}"  # bound, never listening
        status = main(["group", "list", "--format", "json", "--progress", "-b", nobody])
    captured = capsys.readouterr()
    assert status == 1
    assert captured.out == ""
    assert "waiting for the broker" in captured.err
    assert captured.err.endswith("tickwheel group list: no answer from the broker within 0.5 s\n")
