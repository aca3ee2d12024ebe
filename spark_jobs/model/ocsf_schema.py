"""The pinned OCSF schema, read offline from an installed package: classes, objects, types and requirements (no pyspark).

The OCSF tables (:mod:`spark_jobs.model.ocsf`) are typed and validated against one OCSF version,
:data:`OCSF_VERSION`. Its schema comes from the PyPI package ``pydantic-ocsf`` (pinned in requirements.txt), which
ships every OCSF 1.x schema as JSON (``ocsf/schemas/v1_6_0.json``); the file is found through the package's
metadata, so the package's Python models are never imported, and nothing is fetched at run time.

That JSON holds the schema's sources, not a compiled schema: each class and object names the one it ``extends``,
and an attribute's type is in the ``dictionary`` unless the class or object overrides it. :class:`OcsfSchema`
resolves both: :meth:`OcsfSchema.attributes` is every attribute of a class or object with its requirement, type
and whether it is an array; :meth:`OcsfSchema.primitive` is the base type of a type (``ip_t`` is a ``string_t``,
``timestamp_t`` a ``long_t``). The JSON leaves out the profiles' own files; :data:`PROFILE_ATTRIBUTES` holds the
attributes of the one profile the tables apply (``cloud``: ``cloud`` is required where the profile is applied).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

# The OCSF version every OCSF row is written in (its metadata.version) and validated against.
OCSF_VERSION = "1.6.0"
SCHEMA_PACKAGE = "pydantic-ocsf"
# The attributes a profile adds to every class it is applied to, with their requirement (OCSF's profiles/cloud.json).
PROFILE_ATTRIBUTES = {"cloud": {"cloud": "required", "api": "optional"}}
# The types no other type refines; a type not among them names an object.
PRIMITIVES = ("string_t", "integer_t", "long_t", "float_t", "boolean_t", "json_t")
# The type of ``unmapped`` (and of an object's free-form attributes): any JSON object.
ANY_OBJECT = "object"


@dataclass(frozen=True)
class Attribute:
    """One attribute of a class or object in the pinned schema.

    :param name: its name.
    :param type: its OCSF type: a primitive (:data:`PRIMITIVES`), a refined type (``ip_t``) or an object's name.
    :param required: ``requirement`` is ``required``.
    :param array: it holds a list of its type.
    """

    name: str
    type: str
    required: bool
    array: bool


class OcsfSchema:
    """The pinned OCSF version's classes and objects (see the module docstring).

    :param document: the schema's JSON (``version``, ``events``, ``objects``, ``dictionary``, ``categories_meta``).
    """

    def __init__(self, document: dict) -> None:
        self.version = document["version"]
        self._events = document["events"]
        self._objects = document["objects"]
        self._dictionary = document["dictionary"]["attributes"]
        self._types = document["dictionary"]["types"]["attributes"]
        self._categories = document["categories_meta"]["attributes"]

    def _chain(self, table: dict, name: str) -> list[dict]:
        if name not in table:
            raise KeyError(f"OCSF {self.version} has no {'class' if table is self._events else 'object'} {name!r}")
        found = []
        while name:
            found.append(table[name])
            name = table[name].get("extends")
        return found[::-1]

    def attributes(self, name: str, *, object_: bool = False, profiles: tuple[str, ...] = ()) -> dict[str, Attribute]:
        """Every attribute of the class (or, with ``object_``, the object) ``name``, its parents' included, with
        those of the applied ``profiles``."""
        merged: dict[str, dict] = {}
        for part in self._chain(self._objects if object_ else self._events, name):
            for attribute, facts in part["attributes"].items():
                if attribute != "$include":
                    merged.setdefault(attribute, {}).update({k: v for k, v in facts.items() if v is not None})
        for profile in profiles:
            for attribute, requirement in PROFILE_ATTRIBUTES[profile].items():
                merged.setdefault(attribute, {})["requirement"] = requirement
        found = {}
        for attribute, facts in merged.items():
            known = self._dictionary.get(attribute, {})
            kind = facts.get("type") or known.get("type")
            if kind is None:
                raise KeyError(f"OCSF {self.version}: attribute {attribute!r} of {name!r} has no type")
            found[attribute] = Attribute(attribute, kind, facts.get("requirement") == "required",
                                         bool(facts.get("is_array", known.get("is_array", False))))
        return found

    def primitive(self, kind: str) -> str | None:
        """The primitive a type refines (``port_t`` -> ``integer_t``); ``None`` for an object's name."""
        while kind not in PRIMITIVES:
            if kind not in self._types:
                return None
            kind = self._types[kind].get("type") or kind
            if kind not in PRIMITIVES and kind not in self._types:
                return None
        return kind

    def class_uid(self, name: str) -> int:
        """The class's ``class_uid``: its category's uid times 1000 plus its own."""
        chain = self._chain(self._events, name)
        category = next(part["category"] for part in chain[::-1] if part.get("category") not in (None, "other"))
        return self._categories[category]["uid"] * 1000 + chain[-1]["uid"]

    def caption(self, name: str) -> str:
        """The class's caption (``API Activity``)."""
        return self._events[name]["caption"]

    def category_caption(self, name: str) -> str:
        """The caption of the class's category (``Application Activity``)."""
        chain = self._chain(self._events, name)
        category = next(part["category"] for part in chain[::-1] if part.get("category") not in (None, "other"))
        return self._categories[category]["caption"]

    def enum(self, name: str, attribute: str, *, object_: bool = False) -> dict[int, str]:
        """An enumerated attribute's values and captions (a class's own merged over its parents' and the
        dictionary's)."""
        values: dict[int, str] = {}
        sources = [self._dictionary.get(attribute, {})]
        sources += [part["attributes"].get(attribute) or {} for part in
                    self._chain(self._objects if object_ else self._events, name)]
        for source in sources:
            for key, facts in (source.get("enum") or {}).items():
                values[int(key)] = facts.get("caption", key)
        return values


def schema_path(version: str = OCSF_VERSION) -> Path:
    """The schema's JSON file in the installed ``pydantic-ocsf`` package.

    :raises FileNotFoundError: naming the package to install when it is missing.
    """
    try:
        distribution = metadata.distribution(SCHEMA_PACKAGE)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(f"the OCSF schema comes from the package {SCHEMA_PACKAGE}, which is not installed; "
                                "pip install -r requirements.txt") from None
    path = Path(distribution.locate_file(f"ocsf/schemas/v{version.replace('.', '_')}.json"))
    if not path.is_file():
        raise FileNotFoundError(f"{SCHEMA_PACKAGE} {distribution.version} has no OCSF {version} schema at {path}; "
                                "install the version requirements.txt pins")
    return path


@lru_cache(maxsize=2)
def ocsf_schema(version: str = OCSF_VERSION) -> OcsfSchema:
    """The pinned OCSF version's schema (read once per process)."""
    schema = OcsfSchema(json.loads(schema_path(version).read_text()))
    if schema.version != version:
        raise ValueError(f"{schema_path(version)} holds OCSF {schema.version}, not {version}")
    return schema
