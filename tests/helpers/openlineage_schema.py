"""Validate OpenLineage events offline against the specification's JSON schemas of the pinned client
(``tests/helpers/openlineage_spec/``, see its README) and the project's own facet's schema."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from spark_jobs.control.lineage.events import FACET_SCHEMA_FILE

SPEC = Path(__file__).resolve().parent / "openlineage_spec"
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


@lru_cache(maxsize=1)
def registry() -> Registry:
    schemas = [json.loads(p.read_text()) for p in sorted(SPEC.rglob("*.json"))]
    schemas.append(json.loads(FACET_SCHEMA_FILE.read_text()))
    return Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas)


def _validator(ref: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": ref}, registry=registry())


def facet_schemas_known(url: str) -> bool:
    base = url.split("#", 1)[0]
    try:
        registry().get_or_retrieve(base)
    except Exception:  # noqa: BLE001 - a facet of another producer whose schema is not here
        return False
    return True


def problems(event: dict) -> list[str]:
    """Every violation of the core schema (``RunEvent``) and of each facet whose schema is known, as text."""
    found = [f"event: {e.json_path}: {e.message}" for e in _validator(f"{CORE}#/$defs/RunEvent").iter_errors(event)]
    facet_groups = [("run", event.get("run", {}).get("facets", {})), ("job", event.get("job", {}).get("facets", {}))]
    for side in ("inputs", "outputs"):
        for dataset in event.get(side, []):
            for key in ("facets", "inputFacets", "outputFacets"):
                facet_groups.append((f"{side}:{dataset.get('name')}", dataset.get(key) or {}))
    for where, facets in facet_groups:
        for name, facet in facets.items():
            url = facet.get("_schemaURL", "")
            if not facet_schemas_known(url):
                continue
            found += [f"{where}.{name}: {e.json_path}: {e.message}" for e in _validator(url).iter_errors(facet)]
    return found


def known_facets(event: dict) -> set[str]:
    """The run, job and dataset facets of ``event`` whose schema is known here (what :func:`problems` checked)."""
    urls = [f.get("_schemaURL", "") for f in event.get("run", {}).get("facets", {}).values()]
    urls += [f.get("_schemaURL", "") for f in event.get("job", {}).get("facets", {}).values()]
    for side in ("inputs", "outputs"):
        for dataset in event.get(side, []):
            for key in ("facets", "inputFacets", "outputFacets"):
                urls += [f.get("_schemaURL", "") for f in (dataset.get(key) or {}).values()]
    return {re.split("[/:]", url.split("#")[0])[-1] for url in urls if facet_schemas_known(url)}
