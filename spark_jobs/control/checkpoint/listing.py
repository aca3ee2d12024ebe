"""The input files Spark's file source would pick up, listed without Spark.

Spark's file source reports no backlog (that is Auto Loader's ``numFilesOutstanding``), so the
backlog is computed: the files Spark would list (the same filters) minus those in the source log.
Spark's rules, mirrored here:

- ``recursiveFileLookup=true`` walks every sub-folder; otherwise only the folder itself (and
  ``key=value`` partition folders);
- names starting with ``.`` or ``_`` (files or folders, except ``_`` names holding ``=``) and names
  ending in ``._COPYING_`` are skipped;
- ``pathGlobFilter`` is matched against the file name (Hadoop glob: ``* ? [..] {a,b}``);
- zero-byte files are listed like any other (measured: the source log holds them, though the
  job reads no row from them);
- ``maxFileAge`` (default 7 days; ignored with ``latestFirst`` and ``maxFilesPerTrigger``): a file
  older than the newest logged file by more than this is never read.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from spark_jobs.control.checkpoint.store import Location, normalize_file_uri

DEFAULT_MAX_FILE_AGE_MS = 7 * 24 * 3600 * 1000
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?[a-z]*\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


@dataclass(frozen=True)
class InputFile:
    """One listed input file: ``key`` is its identity as Spark's source log names it."""

    key: str
    size: int
    mtime_ms: int


def glob_to_regex(pattern: str) -> re.Pattern:
    """A Hadoop glob (``*``, ``?``, ``[...]``, ``{a,b}``, ``\\`` escapes) as a compiled regex."""
    out, depth, i = [], 0, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1:end]
                body = "^" + body[1:] if body.startswith(("^", "!")) else body
                out.append(f"[{body}]")
                i = end
        elif char == "{":
            depth += 1
            out.append("(?:")
        elif char == "}" and depth:
            depth -= 1
            out.append(")")
        elif char == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def hidden(name: str) -> bool:
    """Spark's rule for names its file listing skips."""
    return (name.startswith("_") and "=" not in name) or name.startswith(".") or name.endswith("._COPYING_")


def max_file_age_ms(options: dict) -> int | None:
    """``maxFileAge`` in ms, or None when Spark ignores it (``latestFirst`` with ``maxFilesPerTrigger``)."""
    if str(options.get("latestFirst", "false")).lower() == "true" and options.get("maxFilesPerTrigger"):
        return None
    text = options.get("maxFileAge")
    if not text:
        return DEFAULT_MAX_FILE_AGE_MS
    match = _DURATION.match(str(text))
    if not match:
        return DEFAULT_MAX_FILE_AGE_MS
    return int(float(match.group(1)) * _UNIT_MS[(match.group(2) or "ms").lower()])


def list_input(root: Location, options: dict) -> list[InputFile]:
    """The files under ``root`` that Spark's file source with ``options`` would list."""
    recursive = str(options.get("recursiveFileLookup", "false")).lower() == "true"
    glob = options.get("pathGlobFilter")
    matcher = glob_to_regex(glob) if glob else None
    found: list[InputFile] = []

    def keep(name: str, size: int) -> bool:
        return not hidden(name) and (matcher is None or matcher.match(name) is not None)

    if root.local:
        for folder, dirs, files in os.walk(root.path):
            dirs[:] = [d for d in dirs if not hidden(d) and (recursive or "=" in d)]
            for name in files:
                path = os.path.join(folder, name)
                try:
                    stat = os.stat(path)
                except FileNotFoundError:
                    continue
                if keep(name, stat.st_size):
                    found.append(InputFile(normalize_file_uri(path), stat.st_size, int(stat.st_mtime * 1000)))
        return found
    protocol = root.url.split("://", 1)[0]
    for path, info in root.fs.find(root.path, withdirs=False, detail=True).items():
        relative = path[len(root.path):].strip("/").split("/")
        if any(hidden(part) for part in relative[:-1]) or (not recursive and any("=" not in p for p in relative[:-1])):
            continue
        size = int(info.get("size") or 0)
        if keep(relative[-1], size):
            moment = info.get("mtime") or info.get("LastModified") or info.get("created")
            mtime = moment.timestamp() if hasattr(moment, "timestamp") else float(moment or 0)
            found.append(InputFile(normalize_file_uri(f"{protocol}://{path.lstrip('/')}"), size, int(mtime * 1000)))
    return found
