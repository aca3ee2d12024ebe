"""An OCSF class's table as Spark sees it: its types from the pinned schema, its rows built from dotted paths.

An OCSF table's columns are the attribute paths its class declares (:class:`~spark_jobs.model.ocsf.OcsfClass`),
each typed by the pinned schema (:mod:`spark_jobs.model.ocsf_schema`): :func:`class_type` is the class's row as a
Spark ``StructType`` of nested structs, :func:`ocsf_row` builds that row from a Column per path (each cast to its
attribute's type with ``try_cast``), and :func:`missing_required` names the required attributes a row lacks.
OCSF's primitives become ``STRING``, ``INT``, ``BIGINT`` (``long_t``, and ``timestamp_t``: milliseconds since the
epoch), ``DOUBLE`` and ``BOOLEAN``; ``json_t`` is JSON text; ``unmapped`` (any JSON object) a ``MAP<STRING,
STRING>``. An object none of whose attributes has a value is NULL, not an empty struct, so an optional object a
source does not fill is absent, as in OCSF's JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.model.ocsf import OCSF_CLASSES
from spark_jobs.model.ocsf_schema import ANY_OBJECT, PROFILE_ATTRIBUTES, Attribute, ocsf_schema

SPARK_TYPES = {"string_t": T.StringType(), "integer_t": T.IntegerType(), "long_t": T.LongType(),
               "float_t": T.DoubleType(), "boolean_t": T.BooleanType(), "json_t": T.StringType()}
ANY_OBJECT_TYPE = T.MapType(T.StringType(), T.StringType())
ARRAY_MARK = "[]"


@dataclass
class Node:
    """One attribute of a class's table: a leaf (a primitive, or ``unmapped``) or an object with children.

    :param attribute: the attribute in the pinned schema.
    :param path: its dotted path from the row (``actor.user.name``).
    :param children: an object's declared attributes, by name, in declaration order.
    """

    attribute: Attribute
    path: str
    children: dict[str, "Node"] = field(default_factory=dict)

    @property
    def leaf(self) -> bool:
        return not self.children

    def spark_type(self) -> T.DataType:
        if self.leaf:
            primitive = ocsf_schema().primitive(self.attribute.type)
            kind = ANY_OBJECT_TYPE if self.attribute.type == ANY_OBJECT else SPARK_TYPES[primitive]
        else:
            kind = T.StructType([T.StructField(name, child.spark_type()) for name, child in self.children.items()])
        return T.ArrayType(kind) if self.attribute.array else kind


def class_tree(name: str) -> dict[str, Node]:
    """The class's declared columns as a tree of :class:`Node` (checked against the pinned schema).

    :raises KeyError: for a path the class or one of its objects does not have, or a path through a primitive.
    """
    schema = ocsf_schema()
    declared = OCSF_CLASSES[name]
    profiles = ("cloud",) if any(c.startswith("cloud.") for c in declared.columns) else ()
    roots: dict[str, Node] = {}
    for path in declared.columns:
        parts = path.replace(ARRAY_MARK, "").split(".")
        level, attributes, so_far = roots, schema.attributes(name, profiles=profiles), []
        for part in parts:
            so_far.append(part)
            if part not in attributes:
                raise KeyError(f"OCSF {schema.version}: {'.'.join(so_far)} is not an attribute of class {name}")
            node = level.setdefault(part, Node(attributes[part], ".".join(so_far)))
            level = node.children
            if part != parts[-1]:
                if schema.primitive(node.attribute.type) is not None or node.attribute.type == ANY_OBJECT:
                    raise KeyError(f"OCSF {schema.version}: {'.'.join(so_far)} of class {name} is not an object")
                attributes = schema.attributes(node.attribute.type, object_=True)
    return roots


def class_type(name: str) -> T.StructType:
    """The class's row as a Spark schema (see the module docstring)."""
    return T.StructType([T.StructField(key, node.spark_type()) for key, node in class_tree(name).items()])


def _built(node: Node, values: dict[str, Column]) -> Column:
    if node.leaf:
        value = values.get(node.path)
        kind = node.spark_type()
        return F.lit(None).cast(kind) if value is None else value.try_cast(kind)
    children = [_built(child, values).alias(key) for key, child in node.children.items()]
    element = F.when(F.greatest(*[child.isNotNull() for child in children], F.lit(False)), F.struct(*children))
    return F.when(element.isNotNull(), F.array(element)) if node.attribute.array else element


def ocsf_row(name: str, values: dict[str, Column]) -> Column:
    """The class's row as one struct Column, each declared path's value from ``values`` (absent: NULL).

    :raises KeyError: for a value whose path the class does not declare.
    """
    tree = class_tree(name)
    values = {path.replace(ARRAY_MARK, ""): value for path, value in values.items()}
    unknown = set(values) - {p.replace(ARRAY_MARK, "") for p in OCSF_CLASSES[name].columns}
    if unknown:
        raise KeyError(f"class {name} declares no column {sorted(unknown)[0]!r}; add it to OCSF_CLASSES[{name!r}]")
    # cast to the class's type: every field nullable, as Delta wants inside arrays (a literal's is not)
    return F.struct(*[_built(node, values).alias(key) for key, node in tree.items()]).cast(class_type(name))


def required_paths(name: str) -> list[tuple[str | None, str, str | None]]:
    """The class's required attributes among its declared objects: (the object's path or ``None`` for the row, the
    attribute's path, the profile that requires it or ``None``). A profile's attribute is required only in the rows
    that apply the profile (``metadata.profiles``); an attribute inside an array of objects is left out (the
    validator checks each element).

    :raises KeyError: for a required attribute the class does not declare.
    """
    found: list[tuple[str | None, str, str | None]] = []
    schema = ocsf_schema()

    def walk(parent: str | None, nodes: dict[str, Node], attributes: dict[str, Attribute]) -> None:
        for attribute in attributes.values():
            if attribute.required:
                path = f"{parent}.{attribute.name}" if parent else attribute.name
                if attribute.name not in nodes:
                    raise KeyError(f"class {name} does not declare {path}, which OCSF {schema.version} requires; add "
                                   f"it to OCSF_CLASSES[{name!r}]")
                found.append((parent, path, None))
        for node in nodes.values():
            if not node.leaf and not node.attribute.array:
                walk(node.path, node.children, schema.attributes(node.attribute.type, object_=True))

    tree = class_tree(name)
    walk(None, tree, schema.attributes(name))
    for profile, attributes in PROFILE_ATTRIBUTES.items():
        for attribute, requirement in attributes.items():
            if requirement == "required" and attribute in tree:
                found.append((None, attribute, profile))
    return found


def missing_required(name: str, row: Column) -> Column:
    """The required attributes ``row`` (the class's struct) lacks, as an array of paths (empty: none)."""
    def at(path: str) -> Column:
        column = row
        for part in path.split("."):
            column = column.getField(part)
        return column

    def applies(parent: str | None, profile: str | None) -> Column:
        if profile is not None:
            return F.coalesce(F.array_contains(at("metadata.profiles"), profile), F.lit(False))
        return at(parent).isNotNull() if parent else F.lit(True)

    checks = [F.when(applies(parent, profile) & at(path).isNull(), F.lit(path))
              for parent, path, profile in required_paths(name)]
    return F.filter(F.array(*checks), lambda path: path.isNotNull())
