"""The benchmark's indexed S3 listing answers exactly what moto answers (tools/bench/s3_listing_index.py)."""

from __future__ import annotations

import pytest

moto_models = pytest.importorskip("moto.s3.models")

from tools.bench.s3_listing_index import index_listings  # noqa: E402

KEYS = [
    "AWSLogs/1/CloudTrail/us-east-1/2025/12/31/a.json.gz",
    "AWSLogs/1/CloudTrail/us-east-1/2026/01/01/b.json.gz",
    "AWSLogs/1/CloudTrail/us-east-1/2026/01/01/c.json.gz",
    "AWSLogs/1/CloudTrail/us-east-10/2026/01/01/d.json.gz",
    "AWSLogs/1/CloudTrail/us-east-1.txt",
    "AWSLogs/1/CloudTrail-Digest/us-east-1/2026/01/01/e.json.gz",
    "AWSLogs/2/CloudTrail/eu-west-1/2026/01/02/f.json.gz",
    "top.json.gz",
]
PREFIXES = ["", "AWSLogs/", "AWSLogs/1/", "AWSLogs/1/CloudTrail/", "AWSLogs/1/CloudTrail/us-east-1",
            "AWSLogs/1/CloudTrail/us-east-1/", "AWSLogs/1/CloudTrail/us-east-1/2026/01/01/", "nothing/"]


class Indexed(moto_models.S3Backend):
    """moto's backend with the benchmark's listing (a subclass: the tests' own S3 server stays moto as it is)."""


index_listings(Indexed)


def answers(backend, bucket: str) -> list:
    out = []
    for prefix in PREFIXES:
        for delimiter in ("/", None):
            for start_after in (None, "AWSLogs/1/CloudTrail/us-east-1/2026/01/01/b.json.gz"):
                keys, truncated, token = backend.list_objects_v2(backend.get_bucket(bucket), prefix, delimiter, None,
                                                                 start_after, 1000)
                out.append((prefix, delimiter, start_after, [getattr(k, "name", k) for k in keys], truncated))
    return out


def test_the_indexed_listing_answers_what_moto_answers_after_puts_and_deletes():
    plain, indexed = moto_models.S3Backend("us-east-1", "123456789012"), Indexed("us-east-1", "123456789012")
    buckets = {id(plain): "listing-plain", id(indexed): "listing-indexed"}  # one namespace for every backend
    for backend in (plain, indexed):
        backend.create_bucket(buckets[id(backend)], "us-east-1")
        for key in KEYS:
            backend.put_object(buckets[id(backend)], key, b"x")
    before = answers(indexed, "listing-indexed")
    assert before == answers(plain, "listing-plain")
    assert ("AWSLogs/1/CloudTrail/", "/", None, ["AWSLogs/1/CloudTrail/us-east-1.txt", "AWSLogs/1/CloudTrail/us-east-1/",
                                                  "AWSLogs/1/CloudTrail/us-east-10/"], False) in before
    for backend in (plain, indexed):  # the index follows what changes
        backend.delete_object(buckets[id(backend)], KEYS[1])
        backend.put_object(buckets[id(backend)], "AWSLogs/1/CloudTrail/us-east-1/2026/01/03/g.json.gz", b"x")
    assert answers(indexed, "listing-indexed") == answers(plain, "listing-plain") != before
