"""Paths of a lake on any fsspec filesystem: local folders and URLs (``memory://``, ``s3://`` ...)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import unquote, urlparse

import fsspec
from fsspec.implementations.local import LocalFileSystem


def is_url(text: str) -> bool:
    return "://" in str(text)


@dataclass(frozen=True)
class Location:
    """One folder (or file) on one filesystem.

    :param fs: the filesystem.
    :param path: the path on ``fs`` (no protocol).
    :param url: how a person names it (the local path, or the URL).
    """

    fs: fsspec.AbstractFileSystem
    path: str
    url: str

    @classmethod
    def of(cls, where: str | os.PathLike) -> "Location":
        text = str(where)
        if not is_url(text):
            text = os.path.abspath(os.path.expanduser(text))
        fs, path = fsspec.core.url_to_fs(text)
        return cls(fs, path.rstrip("/") or "/", text.rstrip("/") or "/")

    @property
    def local(self) -> bool:
        return isinstance(self.fs, LocalFileSystem)

    def child(self, *names: str) -> "Location":
        suffix = "/".join(names)
        return Location(self.fs, f"{self.path}/{suffix}", f"{self.url}/{suffix}")

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def exists(self) -> bool:
        return self.fs.exists(self.path)

    def isdir(self) -> bool:
        return self.fs.isdir(self.path)

    def names(self) -> list[str]:
        """The names in this folder (files and folders); [] if it is not there."""
        try:
            entries = self.fs.ls(self.path, detail=False)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(entry.rstrip("/").rsplit("/", 1)[-1] for entry in entries)

    def read_bytes(self) -> bytes:
        return self.fs.cat_file(self.path)

    def write_bytes(self, data: bytes) -> None:
        if self.local:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            temp = f"{self.path}.doctor-{os.getpid()}.tmp"
            with open(temp, "wb") as handle:
                handle.write(data)
            os.replace(temp, self.path)
        else:
            self.fs.pipe_file(self.path, data)

    def size(self) -> int:
        return int(self.fs.size(self.path))

    def modified(self) -> datetime | None:
        """The last modification time (UTC), or None when the filesystem does not say."""
        try:
            moment = self.fs.modified(self.path)
        except (NotImplementedError, AttributeError, OSError):
            info = self.fs.info(self.path)
            moment = info.get("mtime") or info.get("LastModified") or info.get("created")
            if isinstance(moment, (int, float)):
                moment = datetime.fromtimestamp(moment, timezone.utc)
        if moment is None:
            return None
        return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)

    def remove(self) -> None:
        self.fs.rm_file(self.path)


def normalize_file_uri(uri: str) -> str:
    """A file's identity as Spark logs it (``file:///a/b%20c``) and as a listing names it (``/a/b c``)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        path = unquote(parsed.path) if parsed.scheme else uri
        return "/" + path.lstrip("/")
    return f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"
