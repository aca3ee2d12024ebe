"""An OCSF table checked against the pinned OCSF schema: its types (:func:`schema_problems`) and its rows
(:func:`row_problems`).

The check reads the table as it is, not its declaration: every column and nested field must be an attribute of
its class or object in the pinned version (:mod:`spark_jobs.model.ocsf_schema`), of the Spark type its OCSF type
maps to (:data:`~spark_jobs.transforms.ocsf.columns.SPARK_TYPES`), an array exactly where OCSF says so; every
required attribute must be a column, and hold a value in every row (inside an object, in every row that has the
object; inside an array of objects, in every element); the classification must agree with the class
(``class_uid``, ``category_uid``, ``type_uid = class_uid * 100 + activity_id``), the enumerated ids must be values of
their enums, and ``metadata.version`` the pinned version. The lake's own columns (``date``) are allowed beside.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.model.ocsf import OCSF_DATE
from spark_jobs.model.ocsf_schema import ANY_OBJECT, OCSF_VERSION, PROFILE_ATTRIBUTES, Attribute, ocsf_schema
from spark_jobs.transforms.ocsf.columns import ANY_OBJECT_TYPE, SPARK_TYPES

LAKE_COLUMNS = (OCSF_DATE,)
ENUMS = ("activity_id", "severity_id", "status_id")


def _attributes(owner: str, object_: bool, present: set[str]) -> dict[str, Attribute]:
    """The attributes of a class (with those of the profiles whose attributes its table has) or object; a profile's
    attribute is required only where a row applies the profile (:func:`row_problems`), so none is here."""
    if object_:
        return ocsf_schema().attributes(owner, object_=True)
    profiles = tuple(p for p, names in PROFILE_ATTRIBUTES.items() if present & set(names))
    found = ocsf_schema().attributes(owner, profiles=profiles)
    for profile in profiles:
        for attribute in PROFILE_ATTRIBUTES[profile]:
            found[attribute] = replace(found[attribute], required=False)
    return found


def _expected(attribute: Attribute) -> T.DataType | None:
    """The Spark type of a primitive attribute (``None``: an object, a struct whose fields are checked one by one)."""
    if attribute.type == ANY_OBJECT:
        return ANY_OBJECT_TYPE
    primitive = ocsf_schema().primitive(attribute.type)
    return None if primitive is None else SPARK_TYPES[primitive]


def schema_problems(schema: T.StructType, name: str) -> list[str]:
    """What in ``schema`` (an OCSF table's) disagrees with class ``name`` of the pinned version (empty: nothing)."""
    problems: list[str] = []

    def walk(fields: list[T.StructField], owner: str, object_: bool, prefix: str) -> None:
        attributes = _attributes(owner, object_, {f.name for f in fields})
        present = {f.name for f in fields}
        for attribute in attributes.values():
            if attribute.required and attribute.name not in present:
                problems.append(f"{prefix}{attribute.name}: required by OCSF {OCSF_VERSION}, not a column")
        for f in fields:
            path = f"{prefix}{f.name}"
            if not prefix and f.name in LAKE_COLUMNS:
                continue
            if f.name not in attributes:
                problems.append(f"{path}: not an attribute of {owner} in OCSF {OCSF_VERSION}")
                continue
            attribute = attributes[f.name]
            kind = f.dataType
            if attribute.array != isinstance(kind, T.ArrayType):
                problems.append(f"{path}: {'an array' if attribute.array else 'not an array'} in OCSF, {kind.simpleString()} here")
                continue
            if attribute.array:
                kind = kind.elementType
            expected = _expected(attribute)
            if expected is not None:
                if kind != expected:
                    problems.append(f"{path}: {attribute.type} is {expected.simpleString()}, not {kind.simpleString()}")
            elif not isinstance(kind, T.StructType):
                problems.append(f"{path}: the object {attribute.type} is a struct, not {kind.simpleString()}")
            else:
                walk(kind.fields, attribute.type, True, f"{path}.")

    walk(schema.fields, name, False, "")
    return problems


def _on(column: Column, broken, array: bool) -> Column:
    return F.exists(column, broken) if array else F.coalesce(broken(column), F.lit(False))


def row_problems(frame: DataFrame, name: str) -> dict[str, int]:
    """``{"rows": n}`` and, for each rule a row breaks (see the module docstring), how many rows break it."""
    schema = ocsf_schema()
    uid = schema.class_uid(name)
    rules: list[tuple[str, Column]] = []
    attributes = _attributes(name, False, set(frame.columns))
    for f in frame.schema.fields:
        attribute = attributes.get(f.name)
        if attribute is None or f.name in LAKE_COLUMNS:
            continue
        if attribute.required:
            rules.append((f"{f.name} is NULL", F.col(f.name).isNull()))
        kind = f.dataType.elementType if isinstance(f.dataType, T.ArrayType) else f.dataType
        if isinstance(kind, T.StructType):
            for what, broken in _object_rules(kind, attribute.type, f.name):
                rules.append((what, _on(F.col(f.name), broken, isinstance(f.dataType, T.ArrayType))))
    profiles = F.coalesce(F.col("metadata.profiles"), F.array().cast("array<string>"))
    for profile, names in PROFILE_ATTRIBUTES.items():
        for attribute, requirement in names.items():
            if requirement == "required":
                broken = F.array_contains(profiles, profile) & (F.col(attribute).isNull() if attribute in frame.columns
                                                                else F.lit(True))
                rules.append((f"{attribute} is NULL in a row of the {profile} profile", broken))
    rules += [
        (f"class_uid is not {uid}", F.col("class_uid") != uid),
        (f"category_uid is not {uid // 1000}", F.col("category_uid") != uid // 1000),
        ("type_uid is not class_uid * 100 + activity_id", F.col("type_uid") != F.col("class_uid") * 100 + F.col("activity_id")),
        (f"metadata.version is not {OCSF_VERSION}", F.col("metadata.version") != OCSF_VERSION),
    ]
    for enum in ENUMS:
        if enum in frame.columns:
            allowed = sorted(schema.enum(name, enum))
            rules.append((f"{enum} outside its enum", ~F.col(enum).isin(*allowed)))
    counts = frame.agg(F.count(F.lit(1)).alias("rows"),
                       *[F.count_if(F.coalesce(broken, F.lit(False))).alias(f"r{i}") for i, (_, broken) in
                         enumerate(rules)]).first()
    found = {"rows": counts["rows"]}
    found.update({what: counts[f"r{i}"] for i, (what, _) in enumerate(rules) if counts[f"r{i}"]})
    return found


def _object_rules(kind: T.StructType, owner: str, prefix: str) -> list[tuple[str, object]]:
    """The rules of an object's required attributes, each a function of the object's Column (true: broken, for an
    object that is there)."""
    attributes = _attributes(owner, True, {f.name for f in kind.fields})
    rules = []
    for f in kind.fields:
        attribute = attributes.get(f.name)
        if attribute is None:
            continue
        path = f"{prefix}.{f.name}"
        if attribute.required:
            rules.append((f"{path} is NULL", _lacks(f.name)))
        inner = f.dataType.elementType if isinstance(f.dataType, T.ArrayType) else f.dataType
        if isinstance(inner, T.StructType):
            array = isinstance(f.dataType, T.ArrayType)
            rules += [(what, _inside(f.name, broken, array))
                      for what, broken in _object_rules(inner, attribute.type, path)]
    return rules


# One-argument functions of an object's Column (Spark's higher-order functions take no defaulted arguments).
def _lacks(name: str):
    return lambda o: o.isNotNull() & o.getField(name).isNull()


def _inside(name: str, broken, array: bool):
    return lambda o: _on(o.getField(name), broken, array)
