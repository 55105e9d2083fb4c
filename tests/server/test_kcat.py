"""kcat from Debian (librdkafka 2.0.2, the strictest old client here) against the broker."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tickwheel.server import BackgroundBroker

from .wire import first_batch_attributes

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed"),
]

TIMEOUT_S = 30
LINES = [b"line-%d" % i for i in range(50)]
GZIP = 1
COMPRESSION_CODEC_MASK = 0x07


def kcat(broker: BackgroundBroker, *args: str, stdin: bytes = b"") -> bytes:
    done = subprocess.run(
        ["kcat", "-b", broker.bootstrap_servers, *args],
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT_S,
        check=True,
    )
    return done.stdout


def test_produce_then_consume(tickwheel_broker: BackgroundBroker) -> None:
    kcat(tickwheel_broker, "-P", "-t", "kc", "-p", "0", stdin=b"\n".join(LINES) + b"\n")
    out = kcat(tickwheel_broker, "-C", "-t", "kc", "-p", "0", "-o", "beginning", "-e")
    assert out.splitlines() == LINES


def test_metadata_listing(tickwheel_broker: BackgroundBroker) -> None:
    kcat(tickwheel_broker, "-P", "-t", "listed", "-p", "0", stdin=b"x\n")
    out = kcat(tickwheel_broker, "-L", "-t", "listed")
    assert b'topic "listed" with 1 partitions' in out
    assert b"leader 0" in out


def test_compressed_produce(tickwheel_broker: BackgroundBroker) -> None:
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        topic = f"kc-{codec}"
        kcat(tickwheel_broker, "-P", "-t", topic, "-p", "0", "-z", codec, stdin=b"a\nb\nc\n")
        out = kcat(tickwheel_broker, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e")
        assert out.splitlines() == [b"a", b"b", b"c"]


def test_a_compressed_produce_is_stored_compressed(tickwheel_broker: BackgroundBroker) -> None:
    """An older librdkafka (this kcat's 2.0.2) compresses only if the broker lists
    Produce below version 3, as Kafka 4 does (KAFKA-18659): from 3 it logs "Broker does
    not support compression type gzip" and sends the batch uncompressed."""
    # Each line compresses on its own: a batch of one is still sent compressed.
    lines = b"".join(b"%d " % i + b"alike " * 40 + b"\n" for i in range(200))
    kcat(tickwheel_broker, "-P", "-t", "gz", "-p", "0", "-z", "gzip", stdin=lines)
    attributes = first_batch_attributes(tickwheel_broker.bootstrap_servers, "gz")
    assert attributes & COMPRESSION_CODEC_MASK == GZIP
