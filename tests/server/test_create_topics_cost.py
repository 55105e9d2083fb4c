"""CreateTopics on one broker costs per partition asked for, not per partition held:
the topics file, the descriptor count and the log directory's fsync happen once per
request, however many topics it creates."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tickwheel.server import BackgroundBroker, BrokerConfig
from tickwheel.server import _topics as topics_module
from tickwheel.server.apis import _create_topics

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0
TOPICS = 40
PARTITIONS_EACH = 3


def test_one_request_writes_the_topics_file_and_syncs_the_log_dir_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = BrokerConfig.from_properties(
        {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)}
    )
    with BackgroundBroker(config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        saves: list[int] = []
        counts: list[int] = []
        dir_syncs: list[str] = []
        real_dump = json.dump
        real_fit = _create_topics.partitions_that_fit
        real_fsync = os.fsync

        def dump(data: Any, out: Any, **kwargs: Any) -> None:
            saves.append(len(data["topics"]))
            real_dump(data, out, **kwargs)

        def fit() -> int | None:
            counts.append(1)
            return real_fit()

        def fsync(fd: int) -> None:
            path = os.readlink(f"/proc/self/fd/{fd}")
            if path == str(tmp_path):
                dir_syncs.append(path)
            real_fsync(fd)

        monkeypatch.setattr(topics_module.json, "dump", dump)
        monkeypatch.setattr(_create_topics, "partitions_that_fit", fit)
        monkeypatch.setattr(os, "fsync", fsync)
        futures = admin.create_topics(
            [NewTopic(f"many-{index}", PARTITIONS_EACH, 1) for index in range(TOPICS)],
            request_timeout=TIMEOUT_S,
        )
        for future in futures.values():
            future.result(TIMEOUT_S)
        monkeypatch.undo()
        assert len(counts) == 1
        assert len(dir_syncs) == 1
        # Written once, holding every topic (and the internal ones made before).
        assert len(saves) == 1
        assert saves[0] >= TOPICS
        listed = admin.list_topics(timeout=TIMEOUT_S).topics
        assert all(len(listed[f"many-{i}"].partitions) == PARTITIONS_EACH for i in range(TOPICS))
    # And the file is what a restart reads.
    with BackgroundBroker(config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        listed = admin.list_topics(timeout=TIMEOUT_S).topics
        assert {f"many-{i}" for i in range(TOPICS)} <= set(listed)
