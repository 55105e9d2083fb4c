"""``tickwheel bench cleaner``: log compaction's cost, against a plain copy and on produce.

Method. One process; files in a temporary directory on the file system ``--dir`` names
(default: the system temp dir). Two workloads, each run ``--rounds`` times, the peers
alternating within a round (each going first in turn) so the load of a shared
machine falls on both alike. Printed: the median throughput of each peer and the
median of the per-round ratios subject / peer (above 1: the subject is faster).

- clean: a log of ``--mib`` MiB of dirty data (batches of 16 records of about
  ``--value-bytes`` each, keys drawn from ``--keys`` keys, uncompressed, 8 MiB
  segments, the last one rolled so all are cleanable) is built once, untimed; each
  round copies its directory (untimed) and times one ``clean`` of the copy on the
  calling thread (the broker's cleaner runs the same work in a worker process):
  mapping the dirty section, rewriting every segment, the swaps and the checkpoint. The peer
  copies the same segment files with ``os.pread`` and ``os.write`` in chunks of
  ``log.cleaner.io.buffer.size`` (512 KiB): the least a cleaner must do, reading and
  writing each byte once. Throughput is MiB of dirty log per second, both timed on
  the wall clock (the cleaner runs on one thread).
- produce: a broker (``BackgroundBroker``, in this process) and a confluent-kafka
  producer (librdkafka's own threads, so it takes no GIL time from the broker) send
  ``--produce-mib`` MiB of keyed records (``linger.ms`` 5, acks=1) to a topic with
  ``cleanup.policy=compact`` while the cleaner runs (``log.cleaner.backoff.ms`` 10,
  1 MiB segments, ``min.cleanable.dirty.ratio`` ``--dirty-ratio``: Kafka's 0.5 by
  default, so it cleans each time the dirty bytes reach the clean ones; 0.01 cleans
  again after nearly every roll) and to one with ``cleanup.policy=delete``; timed
  from the first ``produce`` call to the end of ``flush``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Final

from tickwheel.bench._batches import make_keyed_batch
from tickwheel.bench._chart import Bars, Panel, add_png_argument, save_png
from tickwheel.log import Log, LogConfig
from tickwheel.log._cleaner import DEFAULT_IO_BUFFER_BYTES, clean

MIB: Final = 1024 * 1024
DEFAULT_MIB: Final = 64
DEFAULT_PRODUCE_MIB: Final = 32
DEFAULT_KEYS: Final = 10_000
DEFAULT_VALUE_BYTES: Final = 1000
DEFAULT_ROUNDS: Final = 5
RECORDS_PER_BATCH: Final = 16
SEGMENT_BYTES: Final = 8 * MIB
PRODUCE_SEGMENT_BYTES: Final = MIB
_TIMEOUT_S: Final = 120.0
_SEED: Final = 20_240_601


def _build_log(directory: Path, mib: int, keys: int, value_bytes: int) -> int:
    """Write the dirty log the clean rounds copy; returns its size in bytes."""
    rng = random.Random(_SEED)
    config = LogConfig(cleanup_policy="compact", segment_bytes=SEGMENT_BYTES)
    log = Log.open(directory, config)
    value = b"v" * value_bytes
    while log.size_bytes < mib * MIB:
        records = [(b"key-%08d" % rng.randrange(keys), value) for _ in range(RECORDS_PER_BATCH)]
        log.append_as_leader(make_keyed_batch(list(records)), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    size = log.size_bytes
    log.close()
    return size


def _clean_round(source: Path, work: Path) -> tuple[float, float, float]:
    """One clean of a fresh copy and one plain copy; (clean s, copy s, recopy %)."""
    copy_dir = work / "copy-0"
    log_dir = work / "clean-0"
    shutil.rmtree(copy_dir, ignore_errors=True)
    shutil.rmtree(log_dir, ignore_errors=True)
    shutil.copytree(source, log_dir)
    copy_dir.mkdir()
    log = Log.open(log_dir, LogConfig(cleanup_policy="compact", segment_bytes=SEGMENT_BYTES))
    now_ms = time.time_ns() // 1_000_000

    def run_clean() -> tuple[float, float]:
        started = time.perf_counter()
        stats = clean(log, now_ms)
        elapsed = time.perf_counter() - started
        if stats is None:
            raise RuntimeError("the benchmark's log was not cleanable")
        return elapsed, stats.recopy_percent

    def run_copy() -> float:
        started = time.perf_counter()
        _copy_segments(source, copy_dir)
        return time.perf_counter() - started

    if random.random() < 0.5:
        (clean_s, recopy), copy_s = run_clean(), run_copy()
    else:
        copy_s, (clean_s, recopy) = run_copy(), run_clean()
    log.close()
    return clean_s, copy_s, recopy


def _copy_segments(source: Path, target: Path) -> None:
    """Read and write every segment file once, in io-buffer-sized chunks."""
    for segment in sorted(source.glob("*.log")):
        in_fd = os.open(segment, os.O_RDONLY)
        out_fd = os.open(target / segment.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            position = 0
            while chunk := os.pread(in_fd, DEFAULT_IO_BUFFER_BYTES, position):
                os.write(out_fd, chunk)
                position += len(chunk)
        finally:
            os.close(in_fd)
            os.close(out_fd)


def _produce_round(bootstrap: str, topic: str, mib: int, keys: int, value_bytes: int) -> float:
    from confluent_kafka import Producer  # noqa: PLC0415 - only this workload needs it

    rng = random.Random(_SEED)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, "batch.size": 65536}
    )
    value = b"v" * value_bytes
    count = mib * MIB // (value_bytes + 12)
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, key=b"key-%08d" % rng.randrange(keys), value=value)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(_TIMEOUT_S) != 0:
        raise RuntimeError(f"{topic}: records left unsent after {_TIMEOUT_S} s")
    return time.perf_counter() - started


def _produce_rounds(args: argparse.Namespace, directory: Path) -> list[tuple[float, float]]:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # noqa: PLC0415

    from tickwheel.server import BackgroundBroker, BrokerConfig  # noqa: PLC0415

    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(directory / "broker"),
            "log.cleaner.backoff.ms": "10",
        }
    )
    rounds: list[tuple[float, float]] = []
    with BackgroundBroker(config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for index in range(args.rounds):
            topics = {
                f"compact-{index}": {
                    "cleanup.policy": "compact",
                    "min.cleanable.dirty.ratio": str(args.dirty_ratio),
                },
                f"delete-{index}": {"cleanup.policy": "delete"},
            }
            futures = admin.create_topics(
                [
                    NewTopic(
                        name,
                        1,
                        1,
                        config={**settings, "segment.bytes": str(PRODUCE_SEGMENT_BYTES)},
                    )
                    for name, settings in topics.items()
                ]
            )
            for future in futures.values():
                future.result(_TIMEOUT_S)
            order = list(topics) if index % 2 == 0 else list(reversed(topics))
            seconds = {
                name: _produce_round(
                    broker.bootstrap_servers, name, args.produce_mib, args.keys, args.value_bytes
                )
                for name in order
            }
            rounds.append((seconds[f"compact-{index}"], seconds[f"delete-{index}"]))
        metrics = broker.call(lambda b: b.context.metrics.render())
        assert isinstance(metrics, bytes)
        recopy = [line for line in metrics.decode().splitlines() if line.startswith("kafka_log_")]
        print("  cleaner gauges after the produce rounds: " + "; ".join(recopy))
    return rounds


def _report(
    name: str, subject: str, subject_s: list[float], peer: str, peer_s: list[float], mib: float
) -> dict[str, dict[str, float]]:
    """Print one workload's medians and ratio; returns its MiB/s medians for a chart."""
    ratios = [
        peer_time / subject_time for subject_time, peer_time in zip(subject_s, peer_s, strict=True)
    ]
    print(
        f"{name:<10} {subject:<22} {mib / statistics.median(subject_s):7.1f} MiB/s   "
        f"{peer:<22} {mib / statistics.median(peer_s):7.1f} MiB/s   "
        f"ratio {statistics.median(ratios):5.2f}  "
        f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    return {
        subject: {name: mib / statistics.median(subject_s)},
        peer: {name: mib / statistics.median(peer_s)},
    }


def main(argv: list[str]) -> int:
    """Run the clean and produce workloads; print medians and ratios."""
    parser = argparse.ArgumentParser(prog="tickwheel bench cleaner", description=__doc__)
    parser.add_argument("--mib", type=int, default=DEFAULT_MIB)
    parser.add_argument("--produce-mib", type=int, default=DEFAULT_PRODUCE_MIB)
    parser.add_argument("--keys", type=int, default=DEFAULT_KEYS)
    parser.add_argument("--value-bytes", type=int, default=DEFAULT_VALUE_BYTES)
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS)
    parser.add_argument("--dir", type=Path, default=None, help="where to put the files")
    parser.add_argument(
        "--dirty-ratio",
        type=float,
        default=0.5,
        help="min.cleanable.dirty.ratio of the produce workload's compacted topic",
    )
    parser.add_argument("--skip-produce", action="store_true", help="run the clean workload only")
    add_png_argument(parser)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tickwheel-bench-cleaner-", dir=args.dir) as temp:
        directory = Path(temp)
        source = directory / "source-0"
        size = _build_log(source, args.mib, args.keys, args.value_bytes)
        mib = size / MIB
        print(
            f"tickwheel bench cleaner: {mib:.0f} MiB dirty log, {args.keys} keys, "
            f"{args.value_bytes} B values, {args.rounds} rounds, produce with "
            f"min.cleanable.dirty.ratio {args.dirty_ratio}"
        )
        rounds = [_clean_round(source, directory) for _ in range(args.rounds)]
        cleaning = _report(
            "clean",
            "clean (dirty MiB/s)",
            [clean_s for clean_s, _, _ in rounds],
            "pread+write copy",
            [copy_s for _, copy_s, _ in rounds],
            mib,
        )
        print(f"  recopy: {statistics.median(r for _, _, r in rounds):.1f} % of the bytes read")
        panels: list[Panel] = [Bars(title="cleaning", unit="MiB/s", values=cleaning)]
        if not args.skip_produce:
            produced = _produce_rounds(args, directory)
            producing = _report(
                "produce",
                "compact + cleaner",
                [compact for compact, _ in produced],
                "delete",
                [delete for _, delete in produced],
                float(args.produce_mib),
            )
            panels.append(Bars(title="produce while cleaning", unit="MiB/s", values=producing))
    save_png(args.png, "tickwheel bench cleaner (medians)", panels)
    return 0
