"""moto's S3 LIST answered from a sorted key index, as S3 answers it: for the bucket histories of ``history_scale``.

moto (5.x) answers every ``ListObjects``/``ListObjectsV2`` by going through every key of the bucket and, for each
key under the prefix, cutting it at the delimiter (``S3Backend.list_objects`` in ``moto/s3/models.py``). Its cost
is the bucket's size plus everything below the prefix: listing ``AWSLogs/`` to learn the one account folder costs
what 100,000 keys cost. S3 keeps keys in order and answers from the prefix on, returning one entry per common
prefix: what a request costs there follows what it returns, not what sits below it. Measured through moto, the
folders above a landing's date folders (``AWSLogs/``, the account, ``CloudTrail/``, each region: listed at every
walk, whatever their history) cost more the more history they hold, which is moto's doing, not the product's.

:func:`index_listings` replaces ``S3Backend.list_objects`` in the server's own process
(:func:`tools.bench.history_landing._serve`) with the same answer found S3's way: the bucket's key names kept
sorted (rebuilt after a PUT, copy or DELETE), a bisect to the prefix, and each common prefix skipped past in
one bisect. The answer is the original's, entry for entry (``tests/tools/bench/test_s3_listing_index.py``
compares them); only what it costs changes. Only the benchmark's preloaded server uses it; the tests' S3 server
is moto as it is.
"""

from __future__ import annotations

import bisect
import functools
import threading


def _after_prefix(prefix: str) -> str:
    """The first string after every string that starts with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def index_listings(backend_class=None) -> None:
    """Make ``S3Backend.list_objects`` (and so ``list_objects_v2``) answer from a sorted index of each bucket's keys."""
    from moto.s3.models import FakeDeleteMarker, S3Backend

    backend_class = backend_class or S3Backend
    original = backend_class.list_objects
    if getattr(original, "indexed", False):
        return
    indexes: dict[str, list[str]] = {}
    lock = threading.Lock()

    def names(bucket) -> list[str]:
        with lock:
            index = indexes.get(bucket.name)
            if index is None:
                index = indexes[bucket.name] = sorted(bucket.keys.keys())
            return index

    def forget(method):
        @functools.wraps(method)
        def changed(self, bucket_name, *args, **kwargs):
            try:
                return method(self, bucket_name, *args, **kwargs)
            finally:
                with lock:
                    indexes.pop(bucket_name, None)
        return changed

    for name in ("put_object", "delete_object", "delete_objects"):
        setattr(backend_class, name, forget(getattr(backend_class, name)))
    copy = backend_class.copy_object

    @functools.wraps(copy)
    def copy_object(self, src_key, dest_bucket_name, *args, **kwargs):
        try:
            return copy(self, src_key, dest_bucket_name, *args, **kwargs)
        finally:
            with lock:
                indexes.pop(dest_bucket_name, None)

    backend_class.copy_object = copy_object

    def list_objects(self, bucket, prefix, delimiter, marker, max_keys):
        if type(bucket).__name__ == "FakeTableStorageBucket":
            return original(self, bucket, prefix, delimiter, marker, max_keys)
        prefix = prefix or ""
        keys = names(bucket)
        position = bisect.bisect_left(keys, prefix)
        key_results, folder_results = [], []
        while position < len(keys) and keys[position].startswith(prefix):
            name = keys[position]
            rest = name[len(prefix):]
            if delimiter and delimiter in rest:
                folder = prefix + rest.split(delimiter)[0] + delimiter
                folder_results.append(folder)
                position = bisect.bisect_left(keys, _after_prefix(folder), position)
                continue
            key = bucket.keys.get(name)
            if key is not None and not isinstance(key, FakeDeleteMarker):
                key_results.append(key)
            position += 1
        if marker:
            limit = self._pagination_tokens.get(marker) or marker
            key_results = self._get_results_from_token(key_results, limit)
        if max_keys is not None:
            key_results, is_truncated, next_marker = self._truncate_result(key_results, max_keys)
        else:
            is_truncated, next_marker = False, None
        return key_results, folder_results, is_truncated, next_marker

    list_objects.indexed = True
    backend_class.list_objects = list_objects
