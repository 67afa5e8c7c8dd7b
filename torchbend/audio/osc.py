"""OSC control: drive a bended model's controls and bendings from OSC messages."""

from __future__ import annotations

import ast
import logging
import math
import queue
import sys
import threading
from typing import Any

from ..bended import BendedModule
from ..callbacks import callback_from_name
from ..errors import AudioError

__all__ = ["PREFIX", "OSCControl"]

Address = tuple[str, int]
"""A UDP address: ``(host, port)``."""

logger = logging.getLogger(__name__)

PREFIX = "/torchbend"
"""OSC address prefix of every message :class:`OSCControl` understands."""


class OSCControl:
    """An OSC server that turns messages into control changes, applied between audio blocks.

    Address space (``prefix`` is ``/torchbend``):

    - ``/torchbend/<control> value``: ``bended.update(control, value)``;
    - ``/torchbend/bend <CallbackName> <pattern> [args...]``: ``bended.bend(Callback(*args),
      pattern)``; an argument ``"key=value"`` is a keyword argument (``"prob=0.3"``);
    - ``/torchbend/reset``: ``bended.reset()``;
    - ``/torchbend/controls [port]``: describe the controls. The reply, sent to the sender
      (to ``port`` on the sender's host, if given: for clients that send from one port and
      listen on another, as Max's ``udpsend``), is one ``/torchbend/control`` message per
      control: ``name widget type value low high unit curve label group step [choices...]``
      (``value`` a float, an int, or 0 or 1 for a bool; ``low`` and ``high``, floats, the
      values the control takes, ``inf`` where unbounded; ``step`` 0.0 for none; the widget's
      choices for a menu), then ``/torchbend/controls/end count``.

    A message that is refused, there or when applied (an unknown control, a value the control
    refuses, a pattern matching nothing), is logged (``logging``) and answered to its sender
    with ``/torchbend/error address reason``. Values reach the controls through
    ``bended.update``, so that OSC refuses, or clamps for a control with ``clamp=True``,
    exactly what ``update`` does.

    The server runs on its own thread and never touches the model: it parses each message
    and puts it on a queue. The audio thread calls :meth:`apply` between two blocks, which
    drains the queue and changes the model there, so a block never runs on half-applied
    changes and the audio thread never waits on a lock held by the network. Messages are
    applied in the order they arrived; of several updates of one control, only the last one
    is applied. Replies to ``/controls`` are sent from there too, after the changes received
    before the request, so that they describe the controls as they are when it is answered.

    Args:
        bended: the model whose controls and bendings the messages change.
        port: UDP port to listen on; ``0`` picks a free one (read it from :attr:`port`).
        host: address to bind; ``127.0.0.1`` (the default) accepts messages from this
            machine only.
        prefix: OSC address prefix.

    Example:
        >>> import torch, torchbend as tb
        >>> bended = tb.BendedModule(torch.nn.Sequential(torch.nn.Identity()))
        >>> _ = bended.trace(input=torch.zeros(1, 1, 64))
        >>> _ = bended.bend(tb.Scale(tb.BendingParameter("gain", 1.0)), "_0$")
        >>> osc = OSCControl(bended, port=0)
        >>> osc  # osc.start() listens; docs/realtime.md sends it messages
        OSCControl(127.0.0.1:0/torchbend, stopped)
        >>> osc.apply()  # in the audio callback, before each block
        0

    Notes:
        ``/bend`` and ``/reset`` rebuild graphs, which can take longer than a block: expect a
        glitch when they arrive mid-performance, and prefer controls (``update``) for what
        moves. ``/bend`` resolves callbacks by name with :func:`torchbend.callback_from_name`;
        a ``"module:Class"`` name must come from a module already imported (for instance by
        :func:`torchbend.load_callbacks`): a network message never imports code. Controls
        named ``bend``, ``reset`` or ``controls`` cannot be reached over OSC.
    """

    def __init__(
        self,
        bended: BendedModule,
        port: int = 9000,
        host: str = "127.0.0.1",
        prefix: str = PREFIX,
    ) -> None:
        if not isinstance(bended, BendedModule):
            raise AudioError(
                f"OSCControl drives a BendedModule, got {type(bended).__name__}; wrap the model "
                "in tb.BendedModule first"
            )
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise AudioError(f"port must be an int from 0 to 65535, got {port!r}")
        self.bended = bended
        self.host = host
        self.prefix = prefix.rstrip("/")
        self._port = port
        self._queue: queue.SimpleQueue[tuple[tuple[Any, ...], Address]] = queue.SimpleQueue()
        self._received = 0
        self._condition = threading.Condition()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The UDP port listened on (the one picked when created with ``port=0``)."""
        if self._server is not None:
            return int(self._server.server_address[1])
        return self._port

    @property
    def running(self) -> bool:
        """Whether the server is listening."""
        return self._thread is not None

    def start(self) -> OSCControl:
        """Bind the port and listen on a daemon thread; returns ``self``."""
        if self._thread is not None:
            return self
        try:
            from pythonosc.dispatcher import Dispatcher
            from pythonosc.osc_server import BlockingOSCUDPServer
        except ImportError as e:
            raise ImportError("OSC control needs python-osc: pip install 'torchbend[live]'") from e
        dispatcher = Dispatcher()
        dispatcher.set_default_handler(self._receive, needs_reply_address=True)
        # One thread handles messages one after the other (a threading server would start a
        # thread per message and could reorder them).
        try:
            self._server = BlockingOSCUDPServer((self.host, self._port), dispatcher)
        except OSError as e:
            raise AudioError(f"OSC: cannot listen on {self.host}:{self._port}: {e}") from e
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"torchbend-osc-{self.port}",
            daemon=True,
        )
        self._thread.start()
        logger.info("OSC: listening on %s:%d%s/...", self.host, self.port, self.prefix)
        return self

    def stop(self) -> None:
        """Stop listening and free the port (changes still queued stay for :meth:`apply`)."""
        if self._thread is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self._thread = None
        self._server = None

    def __enter__(self) -> OSCControl:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait(self, count: int = 1, timeout: float = 1.0) -> bool:
        """Wait until ``count`` messages in all have been received (good or bad), at most
        ``timeout`` seconds; returns whether they were."""
        with self._condition:
            return self._condition.wait_for(lambda: self._received >= count, timeout)

    @property
    def received(self) -> int:
        """Messages received so far, good or bad."""
        return self._received

    # -- OSC thread: parse, never touch the model --------------------------------------------

    def _receive(self, sender: Address, address: str, *args: Any) -> None:
        try:
            change = self._parse(address, args, sender)
        except AudioError as e:
            logger.warning("OSC: ignored %s %s: %s", address, list(args), e)
            self._reply(sender, "error", address, str(e))
        else:
            self._queue.put((change, sender))
        finally:
            with self._condition:
                self._received += 1
                self._condition.notify_all()

    def _parse(self, address: str, args: tuple[Any, ...], sender: Address) -> tuple[Any, ...]:
        if not address.startswith(self.prefix + "/"):
            raise AudioError(f"unknown address: messages start with {self.prefix}/")
        name = address[len(self.prefix) + 1 :]
        if name == "reset":
            return ("reset",)
        if name == "controls":
            port = args[0] if len(args) == 1 else sender[1]
            valid = isinstance(port, int) and not isinstance(port, bool) and 0 < port <= 65535
            if len(args) > 1 or not valid:
                raise AudioError("/controls takes nothing, or the port to reply to (1 to 65535)")
            return ("controls", (sender[0], port))
        if name == "bend":
            if len(args) < 2 or not all(isinstance(a, str) for a in args[:2]):
                raise AudioError("/bend takes a callback name, a pattern, then its arguments")
            callback, pattern = args[0], args[1]
            if ":" in callback and callback.partition(":")[0] not in sys.modules:
                raise AudioError(
                    f"callback {callback!r} is in a module not imported yet; load it first "
                    "(tb.load_callbacks): OSC never imports code"
                )
            positional: list[Any] = []
            keywords: dict[str, Any] = {}
            for a in args[2:]:
                if isinstance(a, str) and "=" in a:
                    key, _, text = a.partition("=")
                    keywords[key.strip()] = _literal(text.strip())
                else:
                    positional.append(a)
            return ("bend", callback, pattern, tuple(positional), keywords)
        if not name.isidentifier():
            raise AudioError(f"{name!r} is not a control name")
        if len(args) != 1 or not isinstance(args[0], (bool, int, float)):
            raise AudioError(f"control {name!r} takes one number")
        return ("update", name, args[0])

    # -- audio thread: apply between blocks ----------------------------------------------------

    def apply(self) -> int:
        """Apply the changes received since the last call; returns how many were applied.

        Call it between blocks, from the thread that runs the model. Changes that fail (an
        unknown control, a value out of range, a pattern matching nothing) are logged,
        answered with ``/torchbend/error`` and skipped. Requests for ``/controls`` are
        answered here, in their turn.
        """
        updates: dict[str, tuple[Any, Address]] = {}
        applied = 0
        while True:
            try:
                change, sender = self._queue.get_nowait()
            except queue.Empty:
                break
            if change[0] == "update":
                updates.pop(change[1], None)
                updates[change[1]] = (change[2], sender)
                continue
            applied += self._update(updates)
            updates.clear()
            if change[0] == "controls":
                self._describe(change[1])
            else:
                applied += self._change(change, sender)
        return applied + self._update(updates)

    def _update(self, updates: dict[str, tuple[Any, Address]]) -> int:
        done = 0
        for name, (value, sender) in updates.items():
            try:
                self.bended.update(name, value)
            except Exception as e:
                logger.warning("OSC: ignored %s/%s %r: %s", self.prefix, name, value, e)
                self._reply(sender, "error", f"{self.prefix}/{name}", str(e))
            else:
                done += 1
        return done

    def _change(self, change: tuple[Any, ...], sender: Address) -> int:
        try:
            if change[0] == "reset":
                self.bended.reset()
            else:
                _, name, pattern, args, kwargs = change
                callback = callback_from_name(name, imports=())(*args, **kwargs)
                self.bended.bend(callback, pattern)
        except Exception as e:
            words = [f"{self.prefix}/{change[0]}"]
            if change[0] == "bend":
                words += [*change[1:3], *change[3], *(f"{k}={v!r}" for k, v in change[4].items())]
            logger.warning("OSC: ignored %s: %s", " ".join(map(str, words)), e)
            self._reply(sender, "error", words[0], str(e))
            return 0
        return 1

    def _describe(self, to: Address) -> None:
        """Send ``to`` one ``/control`` message per control, then ``/controls/end count``
        (tensor controls, whose values are no numbers, are left out)."""
        controls = [c for c in self.bended.controllables.values() if c.kind != "tensor"]
        for control in controls:
            d = control.describe()
            widget = d["widget"]
            low, high = d["limits"]
            value = int(d["value"]) if d["type"] == "bool" else d["value"]
            self._reply(
                to,
                "control",
                d["name"],
                widget["kind"],
                d["type"],
                value,
                -math.inf if low is None else float(low),
                math.inf if high is None else float(high),
                widget["unit"],
                widget["curve"],
                widget["label"],
                widget["group"],
                0.0 if widget["step"] is None else float(widget["step"]),
                *widget["choices"],
            )
        self._reply(to, "controls/end", len(controls))

    def _reply(self, to: Address, address: str, *args: Any) -> None:
        """Send ``<prefix>/<address> args...`` to ``to`` from the server's socket (a reply
        comes from the port the client sent to); a reply that cannot be sent is logged."""
        server = self._server
        if server is None:
            logger.info("OSC: not listening; no reply %s/%s to %s", self.prefix, address, to)
            return
        from pythonosc.osc_message_builder import build_msg

        try:
            server.socket.sendto(build_msg(f"{self.prefix}/{address}", list(args)).dgram, to)
        except OSError as e:
            logger.warning("OSC: cannot reply %s/%s to %s: %s", self.prefix, address, to, e)

    def __repr__(self) -> str:
        state = "listening" if self.running else "stopped"
        return f"OSCControl({self.host}:{self.port}{self.prefix}, {state})"


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
