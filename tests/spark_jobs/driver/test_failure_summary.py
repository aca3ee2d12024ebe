"""The one line a failed job reports (runner.failure_summary): Spark's first line, or, when the job's own
micro-batch function failed, that line with the exception of the Spark call that failed in it."""

from spark_jobs.driver.runner import failure_summary

PROXY = """An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/x/py4j/clientserver.py", line 644, in _call_proxy
py4j.protocol.Py4JJavaError: An error occurred while calling o3163.collectToPython.
: org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost because they are not available in Kafka any more;
either the data was aged out by Kafka or the topic may have been deleted before all the data in the
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2935)
Caused by: org.apache.spark.SparkException: task failed
\tat org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:620)
Caused by: org.apache.kafka.clients.consumer.OffsetOutOfRangeException: Fetch position FetchPosition{offset=5} is out of range
"""


def test_a_plain_error_is_its_first_line():
    assert failure_summary("[STREAM_FAILED] Query x terminated with exception: disk full\n\tat a.b(C.java:1)") == \
        "[STREAM_FAILED] Query x terminated with exception: disk full"


def test_an_error_of_the_batch_function_adds_its_root_cause():
    assert failure_summary(PROXY) == (
        "An exception was raised by the Python Proxy. Return Message: "
        "org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost because they are not "
        "available in Kafka any more;")


def test_a_python_error_of_the_batch_function_is_its_last_exception_line():
    text = ("An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
            "  File \"/p/runner.py\", line 9, in call\n    raise ValueError('bad column x')\nValueError: bad column x\n")
    assert failure_summary(text) == \
        "An exception was raised by the Python Proxy. Return Message: ValueError: bad column x"


def test_an_empty_error_is_empty():
    assert failure_summary(" \n ") == ""
