"""The record scan's two builds: they walk alike, and Spark's Python workers decode
with the build the driver chose (the compiled twin when the build made one)."""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from tickwheel.log import write_varint
from tickwheel.spark import (
    KafkaBatchReader,
    KafkaDataSource,
    SourceOptions,
    _batch_decode,
    _record_scan,
    _scan_build,
)

from .helpers import KafkaHelper, Record

PROBE = "tickwheel_scan_probe"


def framed(bodies: list[bytes]) -> bytes:
    """Records as a batch holds them: each body after its zig-zag varint length."""
    out = bytearray()
    for body in bodies:
        out += write_varint(len(body))
        out += body
    return bytes(out)


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.binary(min_size=1, max_size=300), max_size=20),
    prefix=st.binary(max_size=5),
    cut=st.one_of(st.just(0), st.integers(1, 50)),
)
def test_both_builds_walk_records_alike(bodies: list[bytes], prefix: bytes, cut: int) -> None:
    if not _scan_build.COMPILED:
        pytest.skip(f"the record scan's build here: {_scan_build.BUILD}")
    # Bytes cut off the end too: both builds must then fail alike.
    whole = prefix + framed(bodies)
    data = whole[: max(len(whole) - cut, 0)]
    outcomes = []
    for scan in (_record_scan.scan_records, _scan_build.scan_records):
        starts: list[int] = []
        try:
            outcome: object = scan(data, len(prefix), len(bodies), starts)
        except (IndexError, ValueError) as exc:
            outcome = type(exc).__name__
        outcomes.append((outcome, starts))
    assert outcomes[0] == outcomes[1]


def test_a_twin_built_from_other_source_or_forced_off_is_not_used(tmp_path: Path) -> None:
    source = Path(_record_scan.__file__).read_bytes()
    (tmp_path / _scan_build.SOURCE).write_bytes(source)
    assert _scan_build.select(tmp_path, {}) == (False, "pure Python")
    (tmp_path / "_mypyc").mkdir()
    hash_file = tmp_path / "_mypyc" / _scan_build.HASH_FILE
    hash_file.write_text(hashlib.sha256(source + b"# changed").hexdigest() + "\n")
    compiled, build = _scan_build.select(tmp_path, {})
    assert not compiled
    assert "stale" in build
    hash_file.write_text(hashlib.sha256(source).hexdigest() + "\n")
    forced = _scan_build.select(tmp_path, {_scan_build.PURE_PYTHON_ENV: "1"})
    assert forced == (False, f"pure Python, forced by {_scan_build.PURE_PYTHON_ENV}")
    # With a matching hash the twin is used if it loads (the package's own, here).
    assert _scan_build.select(tmp_path, {})[0] == _twin_loads()


def _twin_loads() -> bool:
    try:
        importlib.import_module(_scan_build.TWIN_MODULE)
    except ImportError:
        return False
    return True


def probe_source() -> type[KafkaDataSource]:
    """A source that reads like ``tickwheel``, then reports the rows it read and which
    scan the worker ran. Its classes are made here, so that Spark pickles them by value
    (the workers cannot import the tests)."""

    class ProbeReader(KafkaBatchReader):
        def read(self, partition: InputPartition) -> Iterator[tuple[str, str, int]]:
            rows = sum(batch.num_rows for batch in super().read(partition))
            yield (_scan_build.BUILD, _batch_decode.scan_records.__module__, rows)

    class ScanProbe(KafkaDataSource):
        @classmethod
        def name(cls) -> str:
            return PROBE

        def schema(self) -> str:
            return "build string, scan string, rows long"

        def reader(self, schema: StructType) -> DataSourceReader:
            return ProbeReader(SourceOptions.parse(self.options, streaming=False))

    return ScanProbe


@pytest.mark.spark
@pytest.mark.integration
@pytest.mark.slow
def test_spark_workers_decode_with_the_build_the_driver_chose(
    spark: SparkSession, kafka: KafkaHelper
) -> None:
    topic = kafka.new_topic("scan-build", partitions=2)
    kafka.produce(topic, [Record(b"k%d" % n, b"v%d" % n, n % 2) for n in range(1000)])
    spark.dataSource.register(probe_source())

    reports = (
        spark.read.format(PROBE)
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .load()
        .collect()
    )

    expected_scan = _scan_build.TWIN_MODULE if _scan_build.COMPILED else _record_scan.__name__
    assert sorted(tuple(r) for r in reports) == [(_scan_build.BUILD, expected_scan, 500)] * 2
