"""The studio's live socket: JSON messages (start, more, control, stop) answered with blocks of
the current sound played through the bent model, each message sent to its handler by type."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.endpoints import WebSocketEndpoint
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..config.validate import parse
from ..errors import StudioError, TorchbendError
from .playback import MAX_BLOCKS, LiveStream
from .replies import field
from .session import Studio

__all__ = ["LiveSocket"]

log = logging.getLogger(__name__)


class LiveSocket(WebSocketEndpoint):
    """One page's live socket, with the stream it plays (one per connection).

    A message the studio refuses answers ``{"type": "error", "error": ...}`` and the socket
    stays open, so that the page can say what was wrong; anything else that goes wrong closes
    it with code 1011 and the error's text.
    """

    encoding = None  # text and binary messages both reach on_receive: a binary one is refused
    stream: LiveStream | None = None

    async def on_receive(self, websocket: WebSocket, data: Any) -> None:
        try:
            if not isinstance(data, str):
                raise StudioError(
                    f"the live socket takes JSON text messages, got a binary one of "
                    f"{len(data or b'')} bytes"
                )
            message = parse(data, "the message")
            kind = field(message, "type")
            handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
            if handler is None:
                raise StudioError(
                    f"no message type {kind!r}; the live socket takes start, more, control and stop"
                )
            await handler(self, websocket, message)
        except TorchbendError as e:  # the socket stays open: the page says what was wrong
            await websocket.send_json({"type": "error", "error": str(e)})
        except WebSocketDisconnect:
            return
        except Exception as e:  # a bug of ours, or of the model: close saying so
            log.exception("the live socket failed")
            reason = f"the studio failed: {type(e).__name__}: {e}"
            await websocket.close(1011, reason.encode()[:120].decode(errors="ignore"))

    def _studio(self, websocket: WebSocket) -> Studio:
        studio: Studio = websocket.app.state.studio
        return studio

    async def _start(self, websocket: WebSocket, message: Any) -> None:
        sound, block = field(message, "sound", None), field(message, "block", None)
        studio = self._studio(websocket)
        self.stream = await run_in_threadpool(LiveStream, studio, sound, block)
        await websocket.send_json(self.stream.started())

    async def _more(self, websocket: WebSocket, message: Any) -> None:
        if self.stream is None:
            raise StudioError("send {'type': 'start'} before asking for blocks")
        count = field(message, "count", 1)
        if type(count) is not int or not 1 <= count <= MAX_BLOCKS:  # a bool is no count
            raise StudioError(f"'count' is 1 to {MAX_BLOCKS} blocks, got {count!r}")
        for _ in range(count):
            samples, stats = await run_in_threadpool(self.stream.next)
            await websocket.send_bytes(samples)
            await websocket.send_json(stats)

    async def _control(self, websocket: WebSocket, message: Any) -> None:
        name, value = field(message, "name"), field(message, "value")
        editor = self._studio(websocket).editor
        moved = await run_in_threadpool(editor.set_control, name, value)
        await websocket.send_json({"type": "control", **moved})

    async def _stop(self, websocket: WebSocket, message: Any) -> None:
        await websocket.send_json({"type": "stopped"})
        self.stream = None


_HANDLERS: dict[str, Callable[[LiveSocket, WebSocket, Any], Awaitable[None]]] = {
    "start": LiveSocket._start,
    "more": LiveSocket._more,
    "control": LiveSocket._control,
    "stop": LiveSocket._stop,
}
"""The live socket's messages, by their ``type``."""
