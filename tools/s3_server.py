"""A real S3-compatible server on 127.0.0.1 (moto in server mode), for the tests, the demo and the benchmark.

Usage::

    python -m tools.s3_server run [--port N]     # a server in the foreground; Ctrl-C stops it
    python -m tools.s3_server env --port N       # the AWS variables a client needs, as shell exports
    python -m tools.s3_server serve --port N --event-clock FILE   # S3 event times ahead by FILE's seconds

``moto[server]`` (PyPI) answers the S3 API over HTTP like a bucket on AWS: objects, listings,
multipart uploads and conditional puts (``If-None-Match: *`` is refused with 412 when the key exists),
which is what Delta's commits and the single-writer lease rely on. It is a stand-in for AWS: same
protocol, one process, data in memory. :class:`LocalS3` starts it on a free loopback port in its own
process group, waits until it answers, and stops it (SIGTERM, then SIGKILL of the group) so nothing is
left behind. :meth:`LocalS3.environment` gives the standard AWS variables pointing at it, with test
credentials: every client of the project (Spark's S3A, delta-rs, s3fs) reads them and nothing else.

Clock skew: with ``event_clock`` the server's S3 event notifications carry an ``eventTime`` that many seconds
ahead of its clock (the number in that file, read at each event; 0 or no file: none), as when S3's clock and a
worker's disagree. Only the event time moves: SQS visibility timeouts and object times keep the real clock.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tools.ports import free_port

REGION = "us-east-1"


class LocalS3:
    """moto's S3 server on ``127.0.0.1:<port>``.

    :param port: the port (default: a free one).
    :param access_key: the access key id its clients use (moto accepts any).
    :param secret_key: the secret its clients use: a test can plant a distinctive one and grep for it.
    :param log_path: where the server's own output goes (default: discarded).
    :param event_clock: a file holding how many seconds S3 event times run ahead (:meth:`events_ahead`).
    """

    def __init__(self, port: int | None = None, *, access_key: str = "testing-access-key",
                 secret_key: str = "testing-secret-key", log_path: Path | None = None, event_clock: Path | None = None):
        self.port = port or free_port()
        self.event_clock = event_clock
        self.access_key = access_key
        self.secret_key = secret_key
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The standard AWS variables for this server (what a user on AWS would set, plus the endpoint)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": REGION, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key}

    def command(self) -> list[str]:
        """The server's command line (a subclass may start a server that is filled before it answers)."""
        if self.event_clock is not None:
            return [sys.executable, "-m", "tools.s3_server", "serve", "--port", str(self.port),
                    "--event-clock", str(self.event_clock)]
        binary = Path(sys.executable).with_name("moto_server")
        return [str(binary), "-H", "127.0.0.1", "-p", str(self.port)] if binary.exists() else \
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]

    def start(self, timeout: float = 60) -> "LocalS3":
        output = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            self.process = subprocess.Popen(self.command(), stdout=output, stderr=subprocess.STDOUT,
                                            start_new_session=True, cwd=Path(__file__).resolve().parents[1])
        finally:
            if self.log_path:
                output.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the S3 server exited with {self.process.returncode} (see {self.log_path})")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                    return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the S3 server did not answer on {self.endpoint} within {timeout:g} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue

    def events_ahead(self, seconds: float) -> None:
        """From now on, S3 event notifications carry an event time ``seconds`` ahead of the server's clock."""
        if self.event_clock is None:
            raise RuntimeError("this server was started without an event clock (LocalS3(event_clock=...))")
        self.event_clock.write_text(f"{seconds:g}")

    def client(self):
        """A boto3 S3 client for this server (for the tools and tests: creating buckets, uploading)."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key)

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` (if missing); returns its ``s3a://`` URL."""
        client = self.client()
        try:
            client.create_bucket(Bucket=name)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        return f"s3a://{name}"

    def upload(self, folder: Path, bucket: str, prefix: str = "") -> int:
        """Upload every file under ``folder`` to ``bucket`` under ``prefix``, keeping relative paths, in
        name order; returns how many."""
        client, count = self.client(), 0
        for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
            key = "/".join(part for part in (prefix.strip("/"), path.relative_to(folder).as_posix()) if part)
            client.upload_file(str(path), bucket, key)
            count += 1
        return count

    def __enter__(self) -> "LocalS3":
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()


def serve(port: int, event_clock: Path) -> None:
    """moto's server in this process, its S3 event times ahead by the seconds in ``event_clock``."""
    import datetime as dt

    from moto import server
    from moto.core import utils
    from moto.s3 import notifications

    def event_time(value: dt.datetime | None = None) -> str:
        try:
            ahead = float(event_clock.read_text() or 0)
        except (FileNotFoundError, ValueError):
            ahead = 0.0
        return utils.iso_8601_datetime_with_milliseconds(value or utils.utcnow() + dt.timedelta(seconds=ahead))

    notifications.iso_8601_datetime_with_milliseconds = event_time
    server.main(["-H", "127.0.0.1", "-p", str(port)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.s3_server", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("run", "env", "serve"))
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--event-clock", type=Path, help="serve: a file with the seconds S3 event times run ahead")
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.port or free_port(), args.event_clock or Path(os.devnull))
        return 0
    server = LocalS3(args.port)
    if args.command == "env":
        for key, value in server.environment().items():
            print(f"export {key}='{value}'")
        return 0
    server.start()
    print(f"S3 server on {server.endpoint} (Ctrl-C stops it)", flush=True)
    try:
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
