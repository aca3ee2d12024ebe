"""The recovery trial's reading of which landed files a checkpoint has committed."""

import json

from spark_jobs.bench.recovery import committed_files


def _write(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(["v1", *lines]))


def _source_batch(checkpoint, batch_id, names):
    _write(checkpoint / "sources" / "0" / str(batch_id),
           [json.dumps({"path": f"file:///landing/{n}", "timestamp": 1, "batchId": batch_id}) for n in names])


def test_a_source_log_ahead_of_the_query_batches_is_read_through_the_offsets(tmp_path):
    # A driver killed after its file source logged batch 1's files but before it wrote offsets/1:
    # the next driver planned query batch 1 as source-log batches 1 and 2 ({"logOffset": 2}).
    checkpoint = tmp_path / "checkpoint"
    _source_batch(checkpoint, 0, ["a.json.gz"])
    _source_batch(checkpoint, 1, ["b.json.gz"])
    _source_batch(checkpoint, 2, ["c.json.gz"])
    _source_batch(checkpoint, 3, ["d.json.gz"])  # logged by the source, in no batch yet
    for batch, log_offset in ((0, 0), (1, 2)):
        _write(checkpoint / "offsets" / str(batch), [json.dumps({"batchWatermarkMs": 0}), json.dumps({"logOffset": log_offset})])
        _write(checkpoint / "commits" / str(batch), [json.dumps({"nextBatchWatermarkMs": 0})])

    assert committed_files(checkpoint) == {"a.json.gz", "b.json.gz", "c.json.gz"}


def test_nothing_is_committed_before_the_first_commit(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    _source_batch(checkpoint, 0, ["a.json.gz"])
    assert committed_files(checkpoint) == set()
