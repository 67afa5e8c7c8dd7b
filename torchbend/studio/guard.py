"""The studio's guard: requests with another ``Host`` than the server's own, or without its
token, are refused before they reach a route."""

from __future__ import annotations

import hmac
from collections.abc import Collection
from urllib.parse import unquote

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

__all__ = ["TOKEN_COOKIE", "TokenGuard"]

TOKEN_COOKIE = "torchbend_token"
"""The cookie the page sets (``SameSite=Strict``) so that what loads without a script of its
own (the sweep's atlas in its frame, and the files it plays) carries the token too."""


class TokenGuard:
    """Refuses requests with another ``Host`` than ``hosts`` (403), or without ``token`` (401).

    Starlette's ``TrustedHostMiddleware`` is not used for the host check: it compares names
    without their port and answers 400 in plain text, where the studio names the addresses it
    answers at, with the port (a page of another site reaching this machine's port by a name
    of its own, DNS rebinding, is what it stops).

    Args:
        token: when given, every request but the page's own files carries it: header
            ``X-Torchbend-Token``, query ``token`` or the cookie :data:`TOKEN_COOKIE`.
        hosts: when given, the ``Host`` headers (``name:port``) taken.
    """

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        hosts: Collection[str] | None,
    ) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts

    @staticmethod
    def _is_public(path: str) -> bool:
        """Whether ``path`` is the page itself or a vendored library it imports, which hold no
        data (the page reads the token from its address, and a ``<script src>`` or an ``import``
        cannot send a header): everything else needs the token."""
        if path.startswith("/vendor/"):
            return path.count("/") == 3 and ".." not in path
        return path == "/" or (path.startswith("/static/") and path.count("/") == 2)

    def _problem(self, connection: HTTPConnection) -> tuple[int, str] | None:
        if self.hosts is not None and connection.headers.get("host", "") not in self.hosts:
            return 403, f"this studio answers only at {sorted(self.hosts)}"
        if self.token is None or self._is_public(connection.scope["path"]):
            return None
        given = (
            connection.headers.get("x-torchbend-token")
            or connection.query_params.get("token")
            or unquote(connection.cookies.get(TOKEN_COOKIE, ""))
        )
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return 401, "this studio needs its token: open the address it printed"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        problem = self._problem(HTTPConnection(scope))
        if problem is None:
            await self.app(scope, receive, send)
            return
        status, message = problem
        if scope["type"] == "websocket":
            await WebSocketClose(4000 + status, message)(scope, receive, send)
            return
        await JSONResponse({"error": message}, status)(scope, receive, send)
