"""The KRaft cluster id the test broker is formatted with."""

from __future__ import annotations

import base64

from tools.kafka_broker import cluster_id


def test_no_cluster_id_starts_with_a_dash_which_kafka_storage_would_take_for_an_option():
    ids = [cluster_id() for _ in range(3000)]  # a plain urlsafe uuid starts with "-" one time in 64
    assert [i for i in ids if i.startswith("-")] == []
    assert len(set(ids)) == 3000
    assert {len(base64.urlsafe_b64decode(i + "==")) for i in ids} == {16}
