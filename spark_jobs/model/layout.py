"""Where an object's key carries its delivery date and time: :class:`KeyLayout`, declared once per file source.

CloudTrail writes ``AWSLogs/<account>/CloudTrail/<region>/YYYY/MM/DD/<account>_CloudTrail_<region>_
YYYYMMDDTHHMMZ_<id>.json.gz``: the date folders above the file and the delivery time (to the minute) in its
name. Cowrie rotates ``cowrie.json.YYYY-MM-DD`` (a date in the name, no date folders). A job's
:class:`~spark_jobs.model.streams.FileSource` declares that shape once, and everything that selects files by
time derives from it, in every layer:

- discovery lists only the date folders inside its window (:mod:`spark_jobs.control.discovery`);
- a backfill's date or time range, ``reprocess --from-time`` and Airflow's backfill of the catch-up DAG
  select files by :meth:`KeyLayout.delivery_time` (:mod:`spark_jobs.control.catchup.backfill`);
- the pipelined write's delivery-date and delivery-time bounds of a batch come from its files' delivery
  times (:mod:`spark_jobs.driver.write.pipelined`).

A pattern is a regular expression in which ``{YYYY}``, ``{MM}``, ``{DD}``, ``{hh}``, ``{mm}`` and ``{ss}``
stand for the digits of the delivery time. A file's delivery time is its name's (searched in the name; the
fields the name lacks are 0: a date-only name is delivered at midnight UTC), else midnight of its date
folders, else unknown (``None``: such a file has no place in a dated backfill, and discovery dates it by
its modification time). No pyspark, no Airflow: the DAG files read the registry, and with it this.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from functools import cached_property

from spark_jobs.model.errors import RegistryError

FIELDS = {"YYYY": 4, "MM": 2, "DD": 2, "hh": 2, "mm": 2, "ss": 2}
_PLACEHOLDER = re.compile(r"\{(YYYY|MM|DD|hh|mm|ss)\}")
_STRFTIME = {"YYYY": "%Y", "MM": "%m", "DD": "%d", "hh": "%H", "mm": "%M", "ss": "%S"}
_REGEX_SYNTAX = set("[](){}|?*+^$\\")
UTC = dt.timezone.utc


def _compile(pattern: str, what: str) -> re.Pattern:
    """``pattern`` with each placeholder as a named group of its digits (a repeated field must repeat its value)."""
    seen: set[str] = set()

    def group(match: re.Match) -> str:
        name = match.group(1)
        if name in seen:
            return f"(?P={name})"
        seen.add(name)
        return f"(?P<{name}>\\d{{{FIELDS[name]}}})"

    try:
        return re.compile(_PLACEHOLDER.sub(group, pattern))
    except re.error as exc:
        raise RegistryError(f"key layout {what} {pattern!r} is not a regular expression ({exc}); write it like "
                            r"'_{YYYY}{MM}{DD}T{hh}{mm}Z[_.]'") from None


def _moment(groups: dict[str, str | None]) -> dt.datetime | None:
    try:
        return dt.datetime(int(groups["YYYY"]), int(groups.get("MM") or 1), int(groups.get("DD") or 1),
                           int(groups.get("hh") or 0), int(groups.get("mm") or 0), int(groups.get("ss") or 0),
                           tzinfo=UTC)
    except (TypeError, ValueError):
        return None


def _literal_prefix(piece: str) -> str:
    """The plain text a regex piece starts with (``\\.`` is a ``.``), up to its first regex syntax."""
    out, i = [], 0
    while i < len(piece):
        char = piece[i]
        if char == "\\" and i + 1 < len(piece) and not piece[i + 1].isalnum():
            out.append(piece[i + 1])
            i += 2
            continue
        if char in _REGEX_SYNTAX or char == ".":
            break
        out.append(char)
        i += 1
    return "".join(out)


@dataclass(frozen=True)
class KeyLayout:
    """Where the delivery date and time sit in a file source's object keys.

    :param name: a pattern searched in the file name (see the module docstring), e.g.
        ``_{YYYY}{MM}{DD}T{hh}{mm}Z[_.]``; ``None``: names carry no time.
    :param folders: the date folders right above each file, one placeholder per level, e.g.
        ``{YYYY}/{MM}/{DD}``; ``None``: no date folders. Folders above them (accounts, regions) may be anything.
    :param lookback: how far back from the newest delivery it has seen discovery keeps listing and remembering
        files (a duration: ``1 day``, ``6 hours``): a file delivered later than that behind the newest one is
        left to the daily reconcile. ``$<JOB>_LOOKBACK`` or ``run --lookback`` override it.
    """

    name: str | None = None
    folders: str | None = None
    lookback: str = "1 day"
    _levels: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        if self.name is None and self.folders is None:
            raise RegistryError("a key layout needs a name pattern, date folders, or both")
        if self.name is not None and "YYYY" not in self.name:
            raise RegistryError(f"key layout name {self.name!r} has no {{YYYY}}: a delivery time needs at least a year")
        if self.folders is not None:
            levels = tuple(self.folders.strip("/").split("/"))
            fields_ = [_PLACEHOLDER.fullmatch(level) for level in levels]
            if not all(fields_) or [m.group(1) for m in fields_] != ["YYYY", "MM", "DD"][:len(levels)]:
                raise RegistryError(f"key layout folders {self.folders!r} must be {{YYYY}}, {{YYYY}}/{{MM}} or "
                                    "{YYYY}/{MM}/{DD}: one date field per folder level")
            object.__setattr__(self, "_levels", tuple(m.group(1) for m in fields_))
        from spark_jobs.model.times import duration_seconds

        duration_seconds(self.lookback, "key layout lookback")
        _ = self._name  # a name pattern that is not a regular expression fails here, when declared

    @cached_property
    def _name(self) -> re.Pattern | None:
        return None if self.name is None else _compile(self.name, "name")

    @property
    def date_levels(self) -> tuple[str, ...]:
        """The date field of each folder level above a file, outermost first (``("YYYY", "MM", "DD")``)."""
        return self._levels

    @property
    def lookback_seconds(self) -> float:
        from spark_jobs.model.times import duration_seconds

        return duration_seconds(self.lookback, "key layout lookback")

    @property
    def names_carry_minutes(self) -> bool:
        """Whether a name's time is precise to the minute (a delivery-time bound needs that)."""
        return self.name is not None and "{mm}" in self.name

    def name_time(self, key: str) -> dt.datetime | None:
        """The delivery time in the file name of ``key``, or ``None``."""
        if self._name is None:
            return None
        found = self._name.search(key.rsplit("/", 1)[-1])
        return _moment(found.groupdict()) if found else None

    def folder_date(self, key: str) -> dt.date | None:
        """The date of the date folders right above the file of ``key``, or ``None``."""
        if not self._levels:
            return None
        parts = key.rsplit("/", len(self._levels) + 1)[1:-1]
        if len(parts) != len(self._levels):
            return None
        groups = {}
        for level, part in zip(self._levels, parts):
            if len(part) != FIELDS[level] or not part.isdigit():
                return None
            groups[level] = part
        moment = _moment(groups)
        return moment.date() if moment else None

    def delivery_time(self, key: str) -> dt.datetime | None:
        """When ``key`` was delivered (UTC): its name's time, else midnight of its date folders, else ``None``."""
        named = self.name_time(key)
        if named is not None:
            return named
        day = self.folder_date(key)
        return None if day is None else dt.datetime(day.year, day.month, day.day, tzinfo=UTC)

    def delivery_date(self, key: str) -> dt.date | None:
        """The UTC date of :meth:`delivery_time`, or ``None``."""
        moment = self.delivery_time(key)
        return None if moment is None else moment.date()

    def stem(self, key: str) -> str:
        """The folder a file's dates hang from: the folder above its date folders (``.../CloudTrail/us-east-1``),
        else its own folder. Discovery keeps one window per stem: a new stem (an account, a region, a folder of
        old logs copied in) is listed whole once; a known one from its window on."""
        parts = key.split("/")
        depth = len(self._levels)
        if depth:
            for start in range(len(parts) - 1 - depth, 0, -1):
                if all(self.is_date_folder(i, parts[start + i]) for i in range(depth)):
                    return "/".join(parts[:start])
        return "/".join(parts[:-1])

    def is_date_folder(self, depth: int, name: str) -> bool:
        """Whether a folder called ``name`` is date level ``depth`` (0: the year) of this layout."""
        if depth >= len(self._levels):
            return False
        level = self._levels[depth]
        return len(name) == FIELDS[level] and name.isdigit()

    def name_prefix_at(self, name: str, moment: dt.datetime) -> str | None:
        """A name that every name of ``name``'s stem delivered at ``moment`` or later sorts after (an S3
        ``StartAfter``): the stem, then the time a second before ``moment`` as the pattern writes it, cut where the
        pattern stops being plain text. ``None`` when ``name`` does not match the name pattern."""
        if self._name is None:
            return None
        found = self._name.search(name)
        if not found:
            return None
        before = moment - dt.timedelta(seconds=1)
        rendered: list[str] = []
        for piece in re.split(r"(\{(?:YYYY|MM|DD|hh|mm|ss)\})", self.name):
            placeholder = _PLACEHOLDER.fullmatch(piece)
            if placeholder:
                rendered.append(before.strftime(_STRFTIME[placeholder.group(1)]))
                continue
            literal = _literal_prefix(piece)
            rendered.append(literal)
            if len(literal) < len(piece.replace("\\", "")):
                break
        return name[:found.start()] + "".join(rendered)
