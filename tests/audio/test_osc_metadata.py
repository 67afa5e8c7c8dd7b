"""OSC: /torchbend/controls describes the controls to the sender; refused values are answered
with /torchbend/error, and values are refused or clamped exactly as ``bended.update`` does."""

from __future__ import annotations

import logging
import math
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.audio.osc import OSCControl
from torchbend.controls import Widget

pytest.importorskip("pythonosc", reason="OSC tests need python-osc: pip install 'torchbend[live]'")
from pythonosc.osc_message import OscMessage
from pythonosc.udp_client import SimpleUDPClient

pytestmark = pytest.mark.audio

WAIT = 5.0  # seconds; a bound on loopback delivery, normally reached in microseconds


def make_bended() -> tb.BendedModule:
    bended = tb.BendedModule(nn.Sequential(nn.Identity(), nn.Identity()))
    bended.trace(input=torch.zeros(1, 1, 64))
    gain = tb.BendingParameter(
        "gain", 1.0, range=(0.0, 2.0), widget=Widget(unit="dB", label="Gain", group="out")
    )
    std = tb.BendingParameter("std", 0.0, clamp=True)
    shift = tb.BendingParameter("shift", 0, range=(0, 2), widget=Widget(choices=("a", "b", "c")))
    bended.bend(tb.Scale(gain), "_0$")
    bended.bend(tb.Noise(std=std, seed=None), "_1$")
    bended.bend(tb.Bias(shift) >> tb.Invert(active=tb.BendingParameter("flip", False)), "_1$")
    return bended


@pytest.fixture
def osc() -> Iterator[OSCControl]:
    control = OSCControl(make_bended(), port=0).start()
    try:
        yield control
    finally:
        control.stop()


@pytest.fixture
def client(osc: OSCControl) -> Iterator[SimpleUDPClient]:
    client = SimpleUDPClient("127.0.0.1", osc.port)
    try:
        yield client
    finally:
        client.close()


def send(osc: OSCControl, client: SimpleUDPClient, *messages: tuple[str, Any]) -> None:
    before = osc.received
    for address, value in messages:
        client.send_message(address, value)
    assert osc.wait(before + len(messages), timeout=WAIT), "OSC messages never arrived"


def replies(client: SimpleUDPClient, until: str) -> list[OscMessage]:
    """The messages the server sent back to ``client``, up to the first at ``until``."""
    got: list[OscMessage] = []
    while not got or got[-1].address != until:
        data = client.receive(WAIT)
        assert data, f"no reply {until} came back (got {[m.address for m in got]})"
        got.append(OscMessage(data))
    return got


def test_controls_are_described_to_the_sender(osc: OSCControl, client: SimpleUDPClient) -> None:
    send(osc, client, ("/torchbend/gain", 1.5), ("/torchbend/controls", []))
    assert osc.apply() == 1  # the update; the description is no change
    got = replies(client, "/torchbend/controls/end")
    assert [m.address for m in got] == ["/torchbend/control"] * 4 + ["/torchbend/controls/end"]
    described = {m.params[0]: m.params for m in got[:-1]}
    # name widget type value low high unit curve label group step [choices...]
    assert described["gain"] == [
        "gain", "knob", "float", 1.5, 0.0, 2.0, "dB", "linear", "Gain", "out", 0.0
    ]  # fmt: skip
    assert described["std"][:6] == ["std", "knob", "float", 0.0, 0.0, math.inf]
    assert described["shift"] == [
        "shift", "menu", "int", 0, 0.0, 2.0, "", "linear", "shift", "", 0.0, "a", "b", "c"
    ]  # fmt: skip
    assert described["flip"][:6] == ["flip", "toggle", "bool", 0, 0.0, 1.0]
    assert got[-1].params == [4]


def test_controls_are_described_to_another_port_when_asked(
    osc: OSCControl, client: SimpleUDPClient
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.settimeout(WAIT)
        send(osc, client, ("/torchbend/controls", listener.getsockname()[1]))
        osc.apply()
        got = [OscMessage(listener.recv(4096)) for _ in range(5)]
    assert got[-1].address == "/torchbend/controls/end" and got[-1].params == [4]
    assert client.receive(0.05) == b""  # nothing to the sending port


def test_out_of_range_values_are_refused_as_update_refuses_them(
    osc: OSCControl, client: SimpleUDPClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="torchbend.audio.osc")
    bended = osc.bended
    with pytest.raises(tb.BendingError) as refused:
        bended.update("gain", 5.0)
    send(osc, client, ("/torchbend/gain", 5.0))
    assert osc.apply() == 0
    (error,) = replies(client, "/torchbend/error")
    assert error.params == ["/torchbend/gain", str(refused.value)]
    assert "control 'gain': 5.0 is out of its range [0.0, 2.0]" in error.params[1]
    assert str(refused.value) in caplog.text
    assert bended.controllables["gain"].get() == 1.0
    # A control that clamps takes the value update would give it, there and in its bounds.
    twin = tb.BendingParameter("std", 0.0, clamp=True)
    noise = tb.Noise(std=twin)  # holds the bound std >= 0
    twin.set(-3.0)
    send(osc, client, ("/torchbend/std", -3.0), ("/torchbend/shift", 7))
    assert osc.apply() == 1
    assert bended.controllables["std"].get() == twin.get() == noise.std == 0.0
    (error,) = replies(client, "/torchbend/error")
    assert error.params[0] == "/torchbend/shift" and "out of its range [0, 2]" in error.params[1]
    # The server lives on.
    send(osc, client, ("/torchbend/gain", 0.5))
    assert osc.apply() == 1 and bended.controllables["gain"].get() == 0.5


@pytest.mark.parametrize(
    ("address", "value", "reason"),
    [
        ("/torchbend/controls", ["x"], "/controls takes nothing, or the port to reply to"),
        ("/torchbend/controls", [0], "/controls takes nothing, or the port to reply to"),
        ("/torchbend/gain", "loud", "control 'gain' takes one number"),
        ("/elsewhere/gain", 1.0, "unknown address"),
        ("/torchbend/nope", 1.0, "no control named 'nope'"),
        ("/torchbend/flip", 0.5, "control 'flip' takes True or False, got float: 0.5"),
    ],
)
def test_refused_messages_are_answered_with_the_reason(
    osc: OSCControl, client: SimpleUDPClient, address: str, value: Any, reason: str
) -> None:
    send(osc, client, (address, value))
    osc.apply()
    (error,) = replies(client, "/torchbend/error")
    assert error.params[0] == address and reason in error.params[1]
