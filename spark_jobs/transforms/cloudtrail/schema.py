"""The explicit schema of a CloudTrail record.

Spark's JSON reader parses each record straight into this struct. Every leaf is a string, typed
afterwards with ``try_cast``, so a value of an unexpected type (``"readOnly": "true"``) never makes a
record unreadable, and a field of the wrong shape (a string where an object belongs) is NULL alone
(Spark's partial results for JSON). Fields whose shape varies from event to event
(``requestParameters``, ``responseElements``, ...) are strings too: a string field that holds a JSON
object or array gets its JSON text, which the table stores.
"""

from __future__ import annotations

from pyspark.sql.types import StringType, StructField, StructType

S = StringType()


def _struct(*names: str, **nested: StructType) -> StructType:
    return StructType([StructField(n, S) for n in names] + [StructField(k, v) for k, v in nested.items()])


SESSION_ISSUER = _struct("type", "principalId", "arn", "accountId", "userName")
SESSION_ATTRIBUTES = _struct("creationDate", "mfaAuthenticated")
SESSION_CONTEXT = _struct(
    "webIdFederationData", "sourceIdentity", "ec2RoleDelivery", "assumedRoot",
    attributes=SESSION_ATTRIBUTES, sessionIssuer=SESSION_ISSUER,
)
USER_IDENTITY = _struct(
    "type", "principalId", "arn", "accountId", "accessKeyId", "userName", "invokedBy",
    "identityProvider", "credentialId", "onBehalfOf", "inScopeOf",
    sessionContext=SESSION_CONTEXT,
)
TLS_DETAILS = _struct("tlsVersion", "cipherSuite", "clientProvidedHostHeader")

# Top-level scalar fields, read as strings.
SCALAR_FIELDS = (
    "eventVersion", "eventTime", "eventSource", "eventName", "awsRegion", "sourceIPAddress",
    "userAgent", "errorCode", "errorMessage", "requestID", "eventID", "eventType", "apiVersion",
    "managementEvent", "readOnly", "recipientAccountId", "sharedEventID", "vpcEndpointId",
    "vpcEndpointAccountId", "eventCategory", "sessionCredentialFromConsole",
)
# Top-level fields whose shape varies between records: kept as their JSON text.
RAW_JSON_FIELDS = (
    "requestParameters", "responseElements", "additionalEventData", "resources",
    "serviceEventDetails", "addendum", "edgeDeviceDetails", "insightDetails",
)

RECORD_SCHEMA = StructType(
    [StructField(n, S) for n in SCALAR_FIELDS]
    + [StructField(n, S) for n in RAW_JSON_FIELDS]
    + [StructField("userIdentity", USER_IDENTITY), StructField("tlsDetails", TLS_DETAILS)]
)

# Every top-level key the schema knows; any other key goes to the rescued-data column.
KNOWN_TOP_LEVEL_KEYS = tuple(f.name for f in RECORD_SCHEMA.fields)
