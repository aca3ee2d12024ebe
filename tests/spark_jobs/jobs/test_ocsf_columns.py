"""An OCSF class's table type from the pinned schema, and its required attributes (no JVM: Spark's types only)."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from spark_jobs.model import ocsf as model
from spark_jobs.model.ocsf import OCSF_CLASSES, OcsfClass
from spark_jobs.transforms.ocsf.columns import class_type, required_paths


@pytest.mark.parametrize("name", sorted(OCSF_CLASSES))
def test_every_declared_path_is_an_attribute_and_every_required_one_is_declared(name):
    assert class_type(name).fieldNames()[0] == "activity_id"
    assert required_paths(name)  # raises for a path the class lacks, or a required attribute left out


def test_the_types_follow_the_schema():
    api = class_type("api_activity")
    assert api["time"].dataType == T.LongType() and api["activity_id"].dataType == T.IntegerType()
    assert api["unmapped"].dataType == T.MapType(T.StringType(), T.StringType())
    assert api["metadata"].dataType["profiles"].dataType == T.ArrayType(T.StringType())
    assert api["src_endpoint"].dataType["port"].dataType == T.IntegerType()
    evidence = class_type("detection_finding")["evidences"].dataType
    assert isinstance(evidence, T.ArrayType) and evidence.elementType["src_endpoint"].dataType["ip"].dataType == \
        T.StringType()


def test_the_cloud_profile_requires_cloud_only_where_applied():
    assert (None, "cloud", "cloud") in required_paths("api_activity")
    assert ("metadata", "metadata.version", None) in required_paths("api_activity")
    assert ("api", "api.operation", None) in required_paths("api_activity")


def test_a_path_the_class_lacks_or_a_required_one_left_out_is_refused(monkeypatch):
    monkeypatch.setitem(OCSF_CLASSES, "api_activity", OcsfClass("api_activity", 6003, ("activity_id", "api.nope"), ""))
    with pytest.raises(KeyError, match="api.nope is not an attribute of class api_activity"):
        class_type("api_activity")
    monkeypatch.setitem(OCSF_CLASSES, "api_activity", OcsfClass("api_activity", 6003, model.BASE, ""))
    with pytest.raises(KeyError, match="does not declare actor, which OCSF 1.6.0 requires"):
        required_paths("api_activity")
