"""word_count: the quickstart's running word count, complete mode, a Delta table rewritten per micro-batch."""

from __future__ import annotations

import re
from collections import Counter

from spark_jobs.model.lake import Lake
from spark_jobs.registry import get_job
from tests.helpers.analytics import run, table

JOB = get_job("word_count")
FILES = ["The quick brown fox\njumps over the lazy dog\n",
         "the dog's bark --- the fox's den!\n\n  \n",
         "Über café 42 THE end\n"]


def _count(texts: list[str]) -> Counter:
    """The test's own count: lower case, split at anything but letters, digits and apostrophes."""
    return Counter(word for text in texts for word in re.findall(r"[\w']+", text.lower()))


def test_the_word_count_matches_a_batch_count_after_every_file_lands(spark, tmp_path):
    landing, lake = tmp_path / "words", Lake(tmp_path / "lake")
    landing.mkdir()
    for number, text in enumerate(FILES):
        (landing / f".{number}.txt.tmp").write_text(text)
        (landing / f".{number}.txt.tmp").rename(landing / f"{number}.txt")
        summary = run(spark, JOB.name, lake, input_path=landing)

        counts = {r["word"]: r["count"] for r in table(spark, lake, "word_counts").collect()}
        assert counts == _count(FILES[:number + 1])
        assert summary.batches == 1 and summary.rows == {"word_counts": len(counts)}
    # every micro-batch replaced the table in one commit
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, str(lake.table_path("word_counts"))).history().collect()
    assert sorted(h["operation"] for h in history) == ["CREATE TABLE", "WRITE", "WRITE", "WRITE"]
    assert {h["operationParameters"]["mode"] for h in history if h["operation"] == "WRITE"} == {"Overwrite"}


def test_the_batch_transform_gives_the_same_counts(spark, tmp_path):
    from spark_jobs.driver.job_modules import transform_batch

    (tmp_path / "a.txt").write_text(FILES[0])
    (tmp_path / "b.txt").write_text(FILES[1])
    rows = transform_batch(spark, JOB, tmp_path)["word_counts"].collect()
    assert {r["word"]: r["count"] for r in rows} == _count(FILES[:2])
