"""The shipped model, paced: in a process started with ``TORCHBEND_TEST_PAUSE`` set (seconds),
each call of its first encoder layer waits that long first. An interrupt test needs a sweep
that is still running when its first render is written, whatever the machine's load; the
outputs are the shipped model's, bit for bit, paced or not."""

from __future__ import annotations

import os
import time
from typing import Any

from torch import nn

import torchbend as tb

PAUSE = "TORCHBEND_TEST_PAUSE"


def tiny_rave() -> nn.Module:
    model = tb.models.load("tiny_rave")
    pause = float(os.environ.get(PAUSE, "0"))
    if pause > 0:

        def wait(module: nn.Module, args: Any) -> None:
            time.sleep(pause)

        # A leaf of the traced graphs: its hooks run in every call of the bended model.
        model.encoder[0].register_forward_pre_hook(wait)
    return model
