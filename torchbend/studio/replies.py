"""How the studio's server reads request bodies and answers: JSON replies, and the exception
handlers that turn an error into ``{"error": ...}`` with its status."""

from __future__ import annotations

import logging
import math
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..config.validate import parse
from ..errors import StudioError, TorchbendError

__all__ = [
    "EXCEPTION_HANDLERS",
    "JSON_BYTES",
    "body",
    "error",
    "field",
    "has_body",
    "read_body",
    "reply",
    "seconds_value",
]

log = logging.getLogger(__name__)

JSON_BYTES = 2 * 1024 * 1024
"""The largest JSON body a request may send (a bending configuration)."""


def _clean(value: Any) -> Any:
    """``value`` with non-finite floats as ``None``: JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def reply(value: Any, status: int = 200) -> Response:
    """``value`` as a JSON reply (NaN and infinities as ``null``)."""
    return JSONResponse(_clean(value), status)


def error(message: str, status: int) -> Response:
    """The reply of a request the studio refuses: ``{"error": message}``."""
    return reply({"error": message}, status)


def has_body(request: Request) -> bool:
    """Whether ``request`` sends a body (a length other than 0, or chunks)."""
    headers = request.headers
    return headers.get("content-length", "0") != "0" or "chunked" in headers.get(
        "transfer-encoding", ""
    )


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, refused with 413 as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise StudioError(f"the body is {declared} bytes; this request takes at most {limit}", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise StudioError(f"the body passes {limit} bytes, the most this request takes", 413)
        chunks.append(chunk)
    return b"".join(chunks)


async def body(request: Request) -> Any:
    """The request's JSON body, which it must send."""
    data = await read_body(request, JSON_BYTES)
    if not data:
        raise StudioError("this request takes a JSON body")
    return parse(data, "the body")


def field(data: Any, name: str, default: Any = ...) -> Any:
    """``data[name]`` of a JSON object (``default`` when it has none and one is given)."""
    if not isinstance(data, dict):
        raise StudioError(f"the body is a JSON object with {name!r}, got {data!r}")
    if name not in data:
        if default is ...:
            raise StudioError(f"the body has no {name!r}")
        return default
    return data[name]


def seconds_value(seconds: Any) -> float | None:
    """A request's ``seconds``: ``None`` (not given), or a finite number above 0."""
    if seconds is None:
        return None
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not (math.isfinite(seconds) and seconds > 0)
    ):
        raise StudioError(f"'seconds' is a number of seconds above 0, got {seconds!r}")
    return float(seconds)


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StudioError)
    return error(str(exc), exc.status)


async def _bad(request: Request, exc: Exception) -> Response:
    return error(str(exc), 400)


async def _failed(request: Request, exc: Exception) -> Response:
    """A bug of ours, or of the model: say it, and stay up (Starlette logs it too)."""
    log.error(
        "request %s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc
    )
    return error(f"the studio failed on this request: {type(exc).__name__}: {exc}", 500)


async def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    if status == 405:
        return error(f"{request.url.path} does not take {request.method}", 405)
    return error(f"no page or endpoint {request.url.path}; the API is under /api/", status)


EXCEPTION_HANDLERS: dict[Any, Any] = {
    StudioError: _refused,
    TorchbendError: _bad,
    404: _not_found,
    405: _not_found,
    Exception: _failed,
}
"""The studio's answers to errors, by exception class or HTTP status."""


_FILE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def file_name(name: Any, what: str) -> str:
    """``name`` if it may name a file the studio writes (1 to 64 letters, digits, ``-`` or
    ``_``), else a :class:`StudioError` saying so of ``what`` ("a configuration")."""
    if not isinstance(name, str) or not _FILE_NAME.fullmatch(name):
        raise StudioError(f"{what}'s name is 1 to 64 letters, digits, '-' or '_', got {name!r}")
    return name
