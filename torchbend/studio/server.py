"""The studio's server: the page, its JSON API and the live socket, bound to this machine unless
asked otherwise (then only with a token).

Every route is a thin call of :class:`~torchbend.studio.session.Studio`, run in a worker thread
so that a render never blocks the others' replies. A request the studio refuses answers
``{"error": ...}`` with its status; anything else that goes wrong in a request answers 500 with
the error's text and is logged: no render, bending or upload takes the server down.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import math
import secrets
import socket
import threading
import webbrowser
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ..config.validate import parse
from ..errors import StudioError, TorchbendError
from .live import MAX_BLOCKS, LiveStream
from .session import Studio

__all__ = ["StudioServer", "check_bind", "create_app", "is_local"]

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
"""The page's files: served from the package, nothing from the internet."""

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".jsonl": "application/json",
    ".wav": "audio/wav",
    ".flac": "audio/flac",
    ".ogg": "audio/ogg",
}

JSON_BYTES = 2 * 1024 * 1024
"""The largest JSON body a request may send (a bending configuration)."""

Handler = Callable[[Any], Awaitable[Any]]


def is_local(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _clean(value: Any) -> Any:
    """``value`` with non-finite floats as ``None``: JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def create_app(studio: Studio, *, token: str | None = None, hosts: set[str] | None = None) -> Any:
    """The ASGI application of ``studio``.

    Args:
        token: when given, every request carries it (header ``X-Torchbend-Token`` or query
            ``token``), or gets 401.
        hosts: when given, the ``Host`` headers taken (anything else gets 403): a page of
            another site cannot reach a server bound to this machine by a name of its own
            (DNS rebinding).
    """
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import FileResponse, Response
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect

    def reply(value: Any, status: int = 200) -> Response:
        body = json.dumps(_clean(value), allow_nan=False)
        return Response(body, status, media_type="application/json")

    def error(message: str, status: int) -> Response:
        return reply({"error": message}, status)

    def endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                result = await handler(request)
            except StudioError as e:
                return error(str(e), e.status)
            except TorchbendError as e:
                return error(str(e), 400)
            except Exception as e:  # a bug of ours, or of the model: say it, stay up
                log.exception("request %s %s failed", request.method, request.url.path)
                return error(f"the studio failed on this request: {type(e).__name__}: {e}", 500)
            return result if isinstance(result, Response) else reply(result)

        return run

    async def body(request: Request) -> Any:
        data = await _read(request, JSON_BYTES)
        if not data:
            raise StudioError("this request takes a JSON body")
        return parse(data, "the body")

    def field(data: Any, name: str, default: Any = ...) -> Any:
        if not isinstance(data, dict):
            raise StudioError(f"the body is a JSON object with {name!r}, got {data!r}")
        if name not in data:
            if default is ...:
                raise StudioError(f"the body has no {name!r}")
            return default
        return data[name]

    def threaded(fn: Callable[..., Any], *args: Any) -> Awaitable[Any]:
        return run_in_threadpool(fn, *args)

    def index_of(request: Request) -> int:
        text = request.path_params["index"]
        if not text.isdigit():
            raise StudioError(f"a bending is named by its position, a whole number, got {text!r}")
        return int(text)

    async def index_page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type=_TYPES[".html"])

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _static_files():
            return error(f"no file {name!r} in the page", 404)
        return FileResponse(STATIC / name, media_type=_TYPES[Path(name).suffix])

    async def sweep_file(request: Request) -> Response:
        folder = studio.sweep
        if folder is None:
            return error("no sweep: start the studio with --sweep FOLDER", 404)
        path = (folder / request.path_params["path"]).resolve()
        if not path.is_relative_to(folder) or not path.is_file() or path.suffix not in _TYPES:
            return error(f"no file {request.path_params['path']!r} in the sweep", 404)
        return FileResponse(path, media_type=_TYPES[path.suffix])

    async def model(request: Request) -> Any:
        return studio.model_json()

    async def graph(request: Request) -> Any:
        return await threaded(studio.graph, request.query_params.get("fn"))

    async def weights(request: Request) -> Any:
        return {"rows": await threaded(studio.weights, request.query_params.get("pattern"))}

    async def activations(request: Request) -> Any:
        q = request.query_params
        return {"rows": await threaded(studio.activations, q.get("fn"), q.get("pattern"))}

    def name_of(request: Request) -> str:
        name = request.query_params.get("name")
        if not name:
            raise StudioError("give the name: ?name=...")
        return name

    async def activation_stats(request: Request) -> Any:
        fn = request.query_params.get("fn")
        return await threaded(studio.activation_stats, name_of(request), fn)

    async def weight_stats(request: Request) -> Any:
        return await threaded(studio.weight_stats, name_of(request))

    async def callbacks(request: Request) -> Any:
        from .describe import callback_forms

        return {"callbacks": callback_forms()}

    async def config(request: Request) -> Any:
        if request.method == "PUT":
            return await threaded(studio.editor.set_config, await body(request))
        return await threaded(studio.editor.state)

    async def add(request: Request) -> Any:
        return await threaded(studio.editor.add, await body(request))

    async def remove(request: Request) -> Any:
        return await threaded(studio.editor.remove, index_of(request))

    async def move(request: Request) -> Any:
        to = field(await body(request), "to")
        return await threaded(studio.editor.move, index_of(request), to)

    async def reset(request: Request) -> Any:
        return await threaded(studio.editor.reset)

    async def undo(request: Request) -> Any:
        return await threaded(studio.editor.undo)

    async def redo(request: Request) -> Any:
        return await threaded(studio.editor.redo)

    async def control(request: Request) -> Any:
        value = field(await body(request), "value")
        return await threaded(studio.editor.set_control, request.path_params["name"], value)

    async def configs(request: Request) -> Any:
        if request.method == "POST":
            return await threaded(studio.editor.save, field(await body(request), "name"))
        return {"configs": studio.editor.saved()}

    async def saved(request: Request) -> Any:
        return await threaded(studio.editor.load_saved, request.path_params["name"])

    async def sounds(request: Request) -> Any:
        if request.method == "POST":
            name = request.query_params.get("name")
            if not name:
                raise StudioError("give the file's name: POST /api/sounds?name=loop.wav")
            data = await _read(request, studio.library.limits.bytes)
            return await threaded(studio.upload, name, data)
        return studio.sounds()

    async def current(request: Request) -> Any:
        return studio.set_current(field(await body(request), "id"))

    async def render(request: Request) -> Any:
        if request.method == "GET":  # the last render, which a reloaded page shows again
            return {"render": studio.last_render}
        data = await body(request) if _has_body(request) else {}
        sound, seconds = field(data, "sound", None), field(data, "seconds", None)
        return await threaded(studio.render, sound, seconds)

    async def audio(request: Request) -> Response:
        kind = request.path_params["file"].removesuffix(".wav")
        path = studio.audio_file(request.path_params["render"], kind)
        return FileResponse(path, media_type="audio/wav")  # answers Range: the page seeks

    async def answer(ws: WebSocket, message: Any, stream: LiveStream | None) -> LiveStream | None:
        """Answer one message of the live socket; the stream it leaves playing."""
        kind = field(message, "type")
        if kind == "start":
            sound, block = field(message, "sound", None), field(message, "block", None)
            stream = await threaded(LiveStream, studio, sound, block)
            await ws.send_json(stream.started())
        elif kind == "more":
            if stream is None:
                raise StudioError("send {'type': 'start'} before asking for blocks")
            count = field(message, "count", 1)
            if type(count) is not int or not 1 <= count <= MAX_BLOCKS:  # a bool is no count
                raise StudioError(f"'count' is 1 to {MAX_BLOCKS} blocks, got {count!r}")
            for _ in range(count):
                samples, stats = await threaded(stream.next)
                await ws.send_bytes(samples)
                await ws.send_json(stats)
        elif kind == "control":
            name, value = field(message, "name"), field(message, "value")
            moved = await threaded(studio.editor.set_control, name, value)
            await ws.send_json({"type": "control", **moved})
        elif kind == "stop":
            await ws.send_json({"type": "stopped"})
            return None
        else:
            raise StudioError(
                f"no message type {kind!r}; the live socket takes start, more, control and stop"
            )
        return stream

    async def live(ws: WebSocket) -> None:
        await ws.accept()
        stream: LiveStream | None = None
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            try:
                if message.get("text") is None:
                    raise StudioError(
                        f"the live socket takes JSON text messages, got a binary one of "
                        f"{len(message.get('bytes') or b'')} bytes"
                    )
                stream = await answer(ws, parse(message["text"], "the message"), stream)
            except TorchbendError as e:  # the socket stays open: the page says what was wrong
                await ws.send_json({"type": "error", "error": str(e)})
            except WebSocketDisconnect:
                return
            except Exception as e:  # a bug of ours, or of the model: close saying so
                log.exception("the live socket failed")
                reason = f"the studio failed: {type(e).__name__}: {e}"
                await ws.close(1011, reason.encode()[:120].decode(errors="ignore"))
                return

    routes = [
        Route("/", index_page),
        Route("/static/{name}", static),
        Route("/sweep/{path:path}", sweep_file),
        Route("/api/model", endpoint(model)),
        Route("/api/graph", endpoint(graph)),
        Route("/api/weights", endpoint(weights)),
        Route("/api/activations", endpoint(activations)),
        Route("/api/stats/activation", endpoint(activation_stats)),
        Route("/api/stats/weight", endpoint(weight_stats)),
        Route("/api/callbacks", endpoint(callbacks)),
        Route("/api/config", endpoint(config), methods=["GET", "PUT"]),
        Route("/api/bendings", endpoint(add), methods=["POST"]),
        Route("/api/bendings/{index}", endpoint(remove), methods=["DELETE"]),
        Route("/api/bendings/{index}/move", endpoint(move), methods=["POST"]),
        Route("/api/reset", endpoint(reset), methods=["POST"]),
        Route("/api/undo", endpoint(undo), methods=["POST"]),
        Route("/api/redo", endpoint(redo), methods=["POST"]),
        Route("/api/controls/{name}", endpoint(control), methods=["POST"]),
        Route("/api/configs", endpoint(configs), methods=["GET", "POST"]),
        Route("/api/configs/{name}", endpoint(saved)),
        Route("/api/sounds", endpoint(sounds), methods=["GET", "POST"]),
        Route("/api/sounds/current", endpoint(current), methods=["POST"]),
        Route("/api/render", endpoint(render), methods=["GET", "POST"]),
        Route("/api/audio/{render}/{file}", endpoint(audio)),
        WebSocketRoute("/api/live", live),
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        if status == 405:
            return error(f"{request.url.path} does not take {request.method}", 405)
        return error(f"no page or endpoint {request.url.path}; the API is under /api/", status)

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    return _Guard(app, token, hosts)


def _has_body(request: Any) -> bool:
    return request.headers.get("content-length", "0") != "0" or "chunked" in request.headers.get(
        "transfer-encoding", ""
    )


async def _read(request: Any, limit: int) -> bytes:
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


def _static_files() -> set[str]:
    return {p.name for p in STATIC.iterdir() if p.is_file() and p.suffix in _TYPES}


TOKEN_COOKIE = "torchbend_token"
"""The cookie the page sets (``SameSite=Strict``) so that what loads without a script of its
own (the sweep's atlas in its frame, and the files it plays) carries the token too."""


def _cookie(header: str, name: str) -> str:
    from http.cookies import SimpleCookie
    from urllib.parse import unquote

    cookies: SimpleCookie = SimpleCookie()
    try:
        cookies.load(header)
    except Exception:  # a malformed Cookie header: as if there were none
        return ""
    morsel = cookies.get(name)
    return unquote(morsel.value) if morsel is not None else ""


def _public(path: str) -> bool:
    """Whether ``path`` is the page itself, which holds no data and reads the token from its
    address (a ``<script src>`` cannot send a header): everything else needs the token."""
    return path == "/" or (path.startswith("/static/") and path.count("/") == 2)


class _Guard:
    """Refuses requests with another ``Host`` than the server's own, or without the token."""

    def __init__(self, app: Any, token: str | None, hosts: set[str] | None) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        problem = None
        if self.hosts is not None and headers.get("host", "") not in self.hosts:
            problem = (403, f"this studio answers only at {sorted(self.hosts)}")
        elif self.token is not None and not _public(scope["path"]):
            from urllib.parse import parse_qs

            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            given = (
                headers.get("x-torchbend-token")
                or (query.get("token") or [""])[0]
                or _cookie(headers.get("cookie", ""), TOKEN_COOKIE)
            )
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                problem = (401, "this studio needs its token: open the address it printed")
        if problem is None:
            await self.app(scope, receive, send)
            return
        status, message = problem
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 4000 + status, "reason": message})
            return
        body = json.dumps({"error": message}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


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
