"""cloudtrail_alerts: security alerts from stateful rules over CloudTrail events, each fired once.

Usage::

    python -m spark_jobs run cloudtrail_alerts --trigger processing-time:30s     # until SIGTERM
    python -m spark_jobs sql "SELECT detected_at, rule, account_name, subject, detail FROM cloudtrail_alerts
                              ORDER BY detected_at DESC"
    CLOUDTRAIL_ALERTS_SETTINGS='{"silent_after": "30 minutes"}' python -m spark_jobs run cloudtrail_alerts

Reads ``cloudtrail_events`` as a stream and runs the rules of :mod:`spark_jobs.transforms.alert_rules`
with ``transformWithStateInPandas`` (RocksDB state store, processing-time mode: state TTL and
timers). Each alert row has a stable ``alert_id`` (hash of rule, key and window), the account's
name, owner team and environment from the ``accounts`` file (``account_known`` false when it does
not list the account) and ``detected_at`` (when the micro-batch was planned). The table is written
insert-only by ``alert_id``: a replayed batch, or a rule firing again for the same window after its
state expired, adds nothing.

Settings (registry ``settings``; ``$CLOUDTRAIL_ALERTS_SETTINGS`` as a JSON object overrides them):

==========================  ==================================================================
``console_login_failures``  failed ``ConsoleLogin`` events of one user and source IP that make a burst
``console_login_window``    the event-time window (tumbling) they must fall in
``root_window``             one ``root_identity_use`` alert per account and root ARN per such window
``silent_after``            an account with no events received for this long gets ``account_silent``
``allowed_lateness``        window state of a key is dropped once its newest event is this much later
``state_ttl``               state of a key not updated for this long (processing time) expires
==========================  ==================================================================

What counts: a failed console sign-in is a ``ConsoleLogin`` whose ``responseElements.ConsoleLogin`` is
``Failure`` (or that has an ``errorMessage``); root use is an event by ``userIdentity.type = Root``
not invoked by an AWS service and not an ``AwsServiceEvent`` (the CIS benchmark's root-usage filter).
Every event counts for its account's silence timer. The same :func:`transform` runs in batch (there
the processing-time silence timers never fire).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.transforms.alert_rules import BURST, INPUT_COLUMNS, OUTPUT_SCHEMA, ROOT, SILENT, AlertRules, RuleSettings
from spark_jobs.driver.job_contract import BatchContext
from spark_jobs.transforms.enrich import enrich
from spark_jobs.model.jobs import JobSpec
from spark_jobs.model.streams import job_settings

KEY = ["rule", "account_id", "subject", "source_ip"]


def _rule_rows(events: DataFrame) -> DataFrame:
    """One row per event and rule it feeds (every event feeds its account's silence rule)."""
    account = F.coalesce(F.col("recipientAccountId"), F.col("userIdentity_accountId"), F.lit(""))
    user = F.coalesce(F.col("userIdentity_userName"), F.col("userIdentity_arn"), F.col("userIdentity_principalId"),
                      F.lit("unknown"))
    failed_login = (F.col("eventName") == "ConsoleLogin") & (
        (F.get_json_object("responseElements", "$.ConsoleLogin") == "Failure") | F.col("errorMessage").isNotNull())
    root = ((F.col("userIdentity_type") == "Root") & F.col("userIdentity_invokedBy").isNull()
            & (F.coalesce(F.col("eventType"), F.lit("")) != "AwsServiceEvent"))

    def rule(name: str, subject, source_ip):
        return F.struct(F.lit(name).alias("rule"), account.alias("account_id"), subject.alias("subject"),
                        source_ip.alias("source_ip"))

    rules = F.array(F.when(failed_login, rule(BURST, user, F.coalesce(F.col("sourceIPAddress"), F.lit("")))),
                    F.when(root, rule(ROOT, F.coalesce(F.col("userIdentity_arn"), F.lit("root")), F.lit(""))),
                    rule(SILENT, F.lit(""), F.lit("")))
    return (events.select(F.explode(F.filter(rules, lambda r: r.isNotNull())).alias("r"),
                          F.col("eventTime").alias("event_time"), F.col("eventID").alias("event_id"))
            .select("r.*", "event_time", "event_id").select(*INPUT_COLUMNS))


def transform(source: DataFrame, job: JobSpec) -> DataFrame:
    """Alerts of ``cloudtrail_events`` rows (stream or batch): the rules' output, one row per alert.

    :param source: rows of ``cloudtrail_events``.
    :param job: the registry entry (its settings, with ``$CLOUDTRAIL_ALERTS_SETTINGS`` over them).
    """
    rules = AlertRules(RuleSettings(job_settings(job.name, job.settings)))
    return (_rule_rows(source).groupBy(*KEY)
            .transformWithStateInPandas(rules, OUTPUT_SCHEMA, "Append", "ProcessingTime"))


def alerts(result: DataFrame, context: BatchContext) -> DataFrame:
    """Rows of ``cloudtrail_alerts``: the batch's alerts with the account's owner and when they were found (the
    driver conforms them to the table's declared schema)."""
    enriched = enrich(result, context.dimensions["accounts"], "account_id", "account_known")
    return enriched.withColumn("detected_at", F.lit(context.batch_time))


OUTPUTS = {"cloudtrail_alerts": alerts}
