"""S3 addressing and clients shared by the offset store, the Delta sink and Spark's s3a settings.

binlake names S3 locations `s3a://bucket/key` (Spark's Hadoop scheme) or `s3://bucket/key`;
boto3 sees them as a bucket and a key either way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

S3_SCHEMES = ("s3a://", "s3://", "s3n://")

_TRANSIENT_S3_CODES = frozenset(
    {"InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout", "Throttling", "ThrottlingException"}
)
_CONNECT_SECONDS = 5
_READ_SECONDS = 30


@dataclass(frozen=True)
class S3Credentials:
    """Static credentials; kept out of every repr so they never reach a log."""

    access_key_id: str = field(repr=False)
    secret_access_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> S3Credentials | None:
        """The standard AWS variables, or None when they are not both set."""
        environ = os.environ if environ is None else environ
        key, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
        if not key or not secret:
            return None
        return cls(key, secret, environ.get("AWS_SESSION_TOKEN") or None)


@dataclass(frozen=True)
class S3Settings:
    """Where an S3-compatible store is and how to talk to it (all optional: AWS defaults apply)."""

    endpoint_url: str | None = None
    region: str | None = None
    path_style_access: bool | None = None
    credentials: S3Credentials | None = field(default=None, repr=False)
    #: The bound on one wait of one S3 call (connect; a response or the next bytes of one), set by the config
    #: from `source.network_timeout_seconds`; None: boto3's connect 5 s, read 30 s (`s3_client`).
    timeout_seconds: int | None = None

    @property
    def connect_seconds(self) -> int:
        """How long to wait for a TCP (and TLS) connection: 5 s, or the bound if it is shorter."""
        return min(_CONNECT_SECONDS, self.timeout_seconds) if self.timeout_seconds else _CONNECT_SECONDS

    @property
    def read_seconds(self) -> int:
        """How long to wait for a response, or for its next bytes, before the attempt counts as failed."""
        return self.timeout_seconds or _READ_SECONDS

    def delta_rs_timeouts(self) -> dict[str, str]:
        """delta-rs (object_store) client options: the same bounds, the read one on each whole request there
        (object_store uploads a large file in parts, each its own request)."""
        return {"connect_timeout": f"{self.connect_seconds}s", "timeout": f"{self.read_seconds}s"}

    def s3a_timeouts(self) -> dict[str, str]:
        """Spark's S3A (Hadoop 3.4) options: connect, socket read, and the whole request."""
        return {
            "connection.establish.timeout": f"{self.connect_seconds}s",
            "connection.timeout": f"{self.read_seconds}s",
            "connection.request.timeout": f"{self.read_seconds}s",
        }

    @property
    def path_style(self) -> bool:
        """Path-style URLs unless told otherwise when a custom endpoint is set (MinIO, moto, Ceph)."""
        if self.path_style_access is not None:
            return self.path_style_access
        return self.endpoint_url is not None

    def resolved_region(self, environ: Mapping[str, str] | None = None) -> str:
        environ = os.environ if environ is None else environ
        return self.region or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def is_s3_uri(location: str) -> bool:
    return location.startswith(S3_SCHEMES)


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3a://bucket/a/b/` → (`bucket`, `a/b`)."""
    without_scheme = uri.split("://", 1)[1]
    bucket, _, key = without_scheme.partition("/")
    return bucket, key.strip("/")


def s3_client(settings: S3Settings) -> Any:
    """A boto3 S3 client with bounded waits (`S3Settings.connect_seconds`, `read_seconds`) and standard retries.

    A store that accepts the connection and then says nothing fails the attempt after `read_seconds`; with
    the retries a call is bounded by about five times (connect + read) plus back-off.
    """
    import boto3
    from botocore.config import Config

    credentials = settings.credentials
    return boto3.client(
        "s3",
        endpoint_url=settings.endpoint_url,
        region_name=settings.resolved_region(),
        aws_access_key_id=credentials.access_key_id if credentials else None,
        aws_secret_access_key=credentials.secret_access_key if credentials else None,
        aws_session_token=credentials.session_token if credentials else None,
        config=Config(
            retries={"max_attempts": 5, "mode": "standard"},
            connect_timeout=settings.connect_seconds,
            read_timeout=settings.read_seconds,
            s3={"addressing_style": "path" if settings.path_style else "auto"},
        ),
    )


def s3_error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def transient_s3_failure(exc: Exception, code: str) -> bool:
    """Unreachable, timed out, throttled or 5xx: worth retrying. Denied, missing bucket: not."""
    from botocore.exceptions import ClientError

    if not isinstance(exc, ClientError):
        return True  # BotoCoreError: connection refused, timeouts, closed connections
    return code in _TRANSIENT_S3_CODES or code.startswith("5")


def describe_s3_failure(exc: Exception) -> str:
    """A service error by its code; a transport failure by its class and (short) message."""
    code = s3_error_code(exc)
    return code if code else f"{exc.__class__.__name__}: {' '.join(str(exc).split())[:160]}"
