"""The partition status shared by DelayedProduce and DelayedDeleteRecords."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tickwheel.replica._partition_status import PartitionStatus, any_pending, preset_timeouts
from tickwheel.replica._types import DeleteRecordsPartitionResult, ProducePartitionResult


def test_waiting_partitions_answer_request_timed_out_and_failed_ones_keep_their_error() -> None:
    appended = PartitionStatus(7, ProducePartitionResult(ErrorCode.none, base_offset=5))
    failed = PartitionStatus(-1, ProducePartitionResult(ErrorCode.not_leader_or_follower))
    preset_timeouts([appended, failed])
    assert appended.acks_pending
    assert appended.result == ProducePartitionResult(ErrorCode.request_timed_out, base_offset=5)
    assert not failed.acks_pending
    assert failed.result.error_code == ErrorCode.not_leader_or_follower
    assert any_pending([appended, failed])
    appended.acks_pending = False
    assert not any_pending([appended, failed])


def test_delete_records_statuses_share_the_preset() -> None:
    trimmed = PartitionStatus(3, DeleteRecordsPartitionResult(ErrorCode.none, low_watermark=3))
    preset_timeouts([trimmed])
    assert trimmed.acks_pending
    assert trimmed.result == DeleteRecordsPartitionResult(ErrorCode.request_timed_out, 3)
