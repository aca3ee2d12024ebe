"""CloudTrail events (``cloudtrail_events``) as OCSF: the ``cloudtrail_ocsf`` job's mapping.

As AWS Security Lake stores CloudTrail (and as the OCSF examples repository's CloudTrail mapping does): every
event is an API Activity (6003), its activity by the verb its ``eventName`` starts with (:data:`VERBS`: ``Create``
Create, ``Describe`` Read, ``Update`` Update, ``Delete`` Delete, else Other; a ``readOnly`` event unknown to the list
is a Read), but a ``ConsoleLogin``, which is an Authentication (3002, Logon; failed when the response says so),
and IAM's changes of a user (:data:`ACCOUNT_CHANGES`), which are Account Change (3001) with the user changed.
``sourceIPAddress`` is ``src_endpoint.ip`` when it is an address, else its ``domain`` (an AWS service, ``AWS
Internal``). The rows apply OCSF's ``cloud`` profile (provider AWS, the region, the account).
``requestParameters``, ``responseElements``, ``additionalEventData``, ``resources``, the TLS details and the rest of
``userIdentity`` go to ``unmapped``, whole even where a field uses part of them (OCSF's ``api.request.data`` would
need every request to carry a ``requestID``).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_jobs.transforms.ocsf.mapping import OcsfMapping, Reads, Route, job_transform, outputs

# An eventName's verb -> API Activity's activity_id (1 Create, 2 Read, 3 Update, 4 Delete).
VERBS = {"Create": 1, "Put": 1, "Run": 1, "Add": 1, "Import": 1, "Register": 1, "Allocate": 1, "Issue": 1,
         "Get": 2, "List": 2, "Describe": 2, "Head": 2, "Lookup": 2, "BatchGet": 2, "Search": 2, "Scan": 2,
         "Query": 2, "Select": 2, "Update": 3, "Modify": 3, "Set": 3, "Change": 3, "Replace": 3, "Reset": 3,
         "Delete": 4, "Remove": 4, "Terminate": 4, "Deregister": 4, "Release": 4, "Revoke": 4}
# IAM's changes of a user -> Account Change's activity_id.
ACCOUNT_CHANGES = {"CreateUser": 1, "DeleteUser": 6, "ChangePassword": 3, "UpdateLoginProfile": 4,
                   "CreateLoginProfile": 3, "AttachUserPolicy": 7, "PutUserPolicy": 7, "DetachUserPolicy": 8,
                   "DeleteUserPolicy": 8, "EnableMFADevice": 10, "DeactivateMFADevice": 11,
                   "UpdateUser": 99, "AddUserToGroup": 99, "RemoveUserFromGroup": 99}
IP_ADDRESS = r"^(\d{1,3}(\.\d{1,3}){3}|[0-9A-Fa-f:]*:[0-9A-Fa-f:.]+)$"


def _actor(c: Reads) -> dict[str, Column]:
    return {
        "actor.user.name": F.coalesce(c("userIdentity_userName"), c("userIdentity_sessionIssuer_userName")),
        "actor.user.uid": c("userIdentity_principalId"), "actor.user.type": c("userIdentity_type"),
        "actor.user.credential_uid": c("userIdentity_accessKeyId"),
        "actor.user.account.uid": c("userIdentity_accountId"),
        "actor.session.is_mfa": c("userIdentity_mfaAuthenticated"),
        "actor.session.created_time": F.unix_millis(c("userIdentity_sessionCreationDate")),
        "actor.session.issuer": c("userIdentity_sessionIssuer_arn"),
        "actor.invoked_by": c("userIdentity_invokedBy"), "actor.idp.name": c("userIdentity_identityProvider"),
    }


def _common(c: Reads) -> dict[str, Column]:
    """What every CloudTrail event gives, whatever its class."""
    source = c("sourceIPAddress")
    is_ip = source.rlike(IP_ADDRESS)
    failed = c("errorCode").isNotNull()
    return {
        "src_endpoint.ip": F.when(is_ip, source), "src_endpoint.domain": F.when(~is_ip, source),
        "cloud.provider": F.lit("AWS"), "cloud.region": c("awsRegion"), "cloud.account.uid": c("recipientAccountId"),
        "http_request.user_agent": c("userAgent"),
        "status_id": F.when(failed, 2).otherwise(1), "status_code": c("errorCode"), "status_detail": c("errorMessage"),
        "metadata.event_code": c("eventName"), "metadata.log_version": c("eventVersion"),
        **_actor(c),
    }


def api_activity(c: Reads) -> dict[str, Column]:
    name = c("eventName")
    verb = F.regexp_extract(name, r"^(BatchGet|[A-Z][a-z]+)", 1)
    activity = F.coalesce(F.try_element_at(F.create_map(*[F.lit(x) for pair in VERBS.items() for x in pair]), verb),
                          F.when(c.peek("readOnly"), 2), F.lit(99))
    return {**_common(c), "activity_id": activity,
            "api.operation": name, "api.service.name": c("eventSource"), "api.version": c("apiVersion"),
            "api.request.uid": c("requestID"), "api.response.error": c("errorCode"),
            "api.response.error_message": c("errorMessage")}


def authentication(c: Reads) -> dict[str, Column]:
    result = F.get_json_object(c.peek("responseElements"), "$.ConsoleLogin")
    failed = c("errorCode").isNotNull() | (result == "Failure")
    mfa = F.get_json_object(c.peek("additionalEventData"), "$.MFAUsed")
    common = _common(c)
    return {**common, "user.name": common["actor.user.name"], "user.uid": common["actor.user.uid"],
            "user.type": common["actor.user.type"], "user.account.uid": common["actor.user.account.uid"],
            "status_id": F.when(failed, 2).otherwise(1),
            "status_detail": F.coalesce(c("errorMessage"), F.when(result == "Failure", F.lit("Failure"))),
            "is_mfa": F.when(mfa.isNotNull(), mfa == "Yes"), "is_remote": F.lit(True),
            "service.name": c("eventSource")}


def account_change(c: Reads) -> dict[str, Column]:
    return {**_common(c), "user.name": F.get_json_object(c.peek("requestParameters"), "$.userName")}


MAPPING = OcsfMapping(
    log_type="cloudtrail", key="eventID", kind="eventName", time="eventTime", product=("CloudTrail", "AWS"),
    routes={"ConsoleLogin": Route("authentication", 1),
            **{name: Route("account_change", activity) for name, activity in ACCOUNT_CHANGES.items()}},
    default=Route("api_activity"),
    fields={"api_activity": api_activity, "authentication": authentication, "account_change": account_change},
    profiles=("cloud",),
)
transform = job_transform(MAPPING)
OUTPUTS = outputs(MAPPING)
