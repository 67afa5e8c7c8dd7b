"""How the driver of a local sweep and its worker processes talk: pickles after their length
(8 bytes, big-endian) over the worker's standard input and output (see
:mod:`torchbend.sweep.worker`)."""

from __future__ import annotations

import pickle
import struct
from typing import IO, Any

__all__ = ["read_message", "write_message"]

_HEADER = struct.Struct(">Q")


def write_message(stream: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_message(stream: IO[bytes]) -> Any:
    """The next message, or ``None`` at the end of the stream (or if it ends mid-message)."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)
