"""The ``harness`` fixture: a started coordinator on a manual clock (see ``harness.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import Harness, make_config


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness(make_config())
    yield h
    h.close()
