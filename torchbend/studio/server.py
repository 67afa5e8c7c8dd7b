"""The studio's server: the page, its JSON API and the live socket, bound to this machine unless
asked otherwise (then only with a token).

The application is Starlette's own: routes (:mod:`.routes`), the live socket
(:mod:`.live_socket`), exception handlers (:mod:`.replies`: a request the studio refuses answers
``{"error": ...}`` with its status; anything else that goes wrong answers 500 with the error's
text and is logged, no render, bending or upload takes the server down), the guard of hosts and
token (:mod:`.guard`) and the page's files, served from the package, nothing from the internet.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
import threading
import webbrowser
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from ..errors import StudioError
from .guard import TOKEN_COOKIE, TokenGuard
from .live_socket import LiveSocket
from .replies import EXCEPTION_HANDLERS, JSON_BYTES
from .routes import API_ROUTES, sweep_file
from .session import Studio

__all__ = ["TOKEN_COOKIE", "StudioServer", "check_bind", "create_app", "is_local"]

STATIC = Path(__file__).resolve().parent / "static"
"""The page's files: served from the package, nothing from the internet."""

VENDOR = Path(__file__).resolve().parent / "vendor"
"""Third-party libraries the page imports (the graph layout), each at a pinned version with its
licence, updated by ``scripts/vendor_layout.sh``."""


def is_local(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def index_page(request: Request) -> Response:
    """The page."""
    return FileResponse(STATIC / "index.html")


def create_app(studio: Studio, *, token: str | None = None, hosts: set[str] | None = None) -> Any:
    """The ASGI application of ``studio``.

    Args:
        token: when given, every request carries it (header ``X-Torchbend-Token`` or query
            ``token``), or gets 401.
        hosts: when given, the ``Host`` headers taken (anything else gets 403): a page of
            another site cannot reach a server bound to this machine by a name of its own
            (DNS rebinding).
    """
    routes = [
        Route("/", index_page),
        Mount("/static", StaticFiles(directory=STATIC)),
        Mount("/vendor", StaticFiles(directory=VENDOR)),
        Route("/sweep/{path:path}", sweep_file),
        *API_ROUTES,
        WebSocketRoute("/api/live", LiveSocket),
    ]
    guard = Middleware(TokenGuard, token=token, hosts=hosts)
    app = Starlette(routes=routes, middleware=[guard], exception_handlers=EXCEPTION_HANDLERS)
    app.state.studio = studio
    return app


def check_bind(host: str, token: str | None, remote: bool) -> str | None:
    """The token a server on ``host`` needs: a non-local ``host`` only with ``remote``, and
    ``remote`` always with a token (one is made if none is given), whatever the host: a
    loopback port reached through an SSH tunnel or a proxy is reached from other machines."""
    if not is_local(host) and not remote:
        raise StudioError(
            f"--host {host} would let other machines reach the studio; add --remote "
            "(and share the printed address, which holds a token) or bind 127.0.0.1"
        )
    if remote:
        token = token or secrets.token_urlsafe(16)
    if token is not None and (len(token) < 8 or not token.isprintable() or " " in token):
        raise StudioError("a token is at least 8 printable characters, without spaces")
    return token


class StudioServer:
    """The studio served on ``host:port`` (port 0: any free port).

    A non-local ``host`` is refused unless ``remote`` is set; ``remote`` always needs a token
    (one is made if none is given), on a loopback host too (an SSH tunnel's end): anyone who
    can reach the port could otherwise bend the model, upload files and fill the output folder.
    A local server without ``remote`` answers only requests that name it in their ``Host``
    header; a remote one answers any name, the token guarding it.
    """

    def __init__(
        self,
        studio: Studio,
        host: str = "127.0.0.1",
        port: int = 8765,
        token: str | None = None,
        remote: bool = False,
    ) -> None:
        import uvicorn

        self.studio = studio
        self.token = check_bind(host, token, remote)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.socket.bind((host, port))
        except OSError as e:
            self.socket.close()
            raise StudioError(
                f"cannot listen on {host}:{port} ({e.strerror}); choose another --port"
            ) from None
        self.socket.listen(128)  # the printed address takes connections from now on
        self.host = host
        self.port = self.socket.getsockname()[1]
        hosts = None  # remote: reached by names of its own (a tunnel's port), the token guards
        if is_local(host) and not remote:
            shown = f"[{host}]" if ":" in host else host
            hosts = {f"{h}:{self.port}" for h in (shown, "localhost", "127.0.0.1", "[::1]")}
        app = create_app(studio, token=self.token, hosts=hosts)
        config = uvicorn.Config(
            app, log_level="warning", ws="auto", ws_max_size=JSON_BYTES, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The page's address (with the token, if any)."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        url = f"http://{shown}:{self.port}/"
        return url + (f"?token={self.token}" if self.token else "")

    def run(self, open_browser: bool = False) -> None:
        """Serve until interrupted (Ctrl+C)."""
        if open_browser:
            threading.Timer(0.5, webbrowser.open, (self.url,)).start()
        self.server.run(sockets=[self.socket])

    def start(self) -> StudioServer:
        """Serve from a thread of its own; returns once the server answers."""
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.socket])), daemon=True
        )
        self._thread.start()
        while not self.server.started:
            if not self._thread.is_alive():
                raise StudioError("the studio's server stopped while starting")
            threading.Event().wait(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self.socket.close()
