"""A studio served for real (uvicorn on a free port, in a thread) and a small HTTP client for it,
for the tests of the server and of the page."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from torchbend.models.reference import load_model
from torchbend.studio import Studio, StudioServer

__all__ = ["Client", "decode_wav", "served", "tiny_studio"]


def tiny_studio(output: Path, **kwargs: Any) -> Studio:
    """The shipped model in a studio writing to ``output``."""
    return Studio(load_model("tiny_rave"), "tiny_rave", output=output, **kwargs)


@contextmanager
def served(studio: Studio, **kwargs: Any) -> Iterator[StudioServer]:
    """``studio`` served on 127.0.0.1 and a free port until the block ends."""
    server = StudioServer(studio, port=0, **kwargs).start()
    try:
        yield server
    finally:
        server.stop()


class Client:
    """Requests to a studio: each answers ``(status, body)``, the body decoded from JSON when
    it is JSON."""

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        self.base = base.split("?")[0].rstrip("/")
        self.headers = headers or {}

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers={**self.headers, **(headers or {})}
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                status, kind, content = response.status, response.headers, response.read()
        except urllib.error.HTTPError as e:
            status, kind, content = e.code, e.headers, e.read()
        if kind.get("content-type", "").startswith("application/json"):
            return status, json.loads(content)
        return status, content

    def declared(self, path: str, length: int) -> tuple[int, Any]:
        """POST that declares a body of ``length`` bytes and sends none: what a server that
        refuses large bodies from their header answers."""
        import http.client
        from urllib.parse import urlsplit

        parts = urlsplit(self.base)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            connection.putrequest("POST", path)
            for key, value in self.headers.items():
                connection.putheader(key, value)
            connection.putheader("Content-Length", str(length))
            connection.endheaders()
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    def get(self, path: str, **kwargs: Any) -> tuple[int, Any]:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        return self.request("POST", path, body, **kwargs)

    def put(self, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        return self.request("PUT", path, body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> tuple[int, Any]:
        return self.request("DELETE", path, **kwargs)

    def ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        """The body of a request that must succeed."""
        status, got = self.request(method, path, body, **kwargs)
        assert status == 200, (status, got)
        return got


def decode_wav(data: bytes) -> tuple[torch.Tensor, int]:
    """A WAV file's samples ``[channels, time]`` and rate."""
    import soundfile

    samples, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return torch.from_numpy(samples.T.copy()), rate
