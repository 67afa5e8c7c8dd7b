"""``torchbend live``: play a bended model on the sound card."""

from __future__ import annotations

import argparse
from typing import Any

import torch

from ...audio.render import ratio_of, streams, trace_audio
from ...audio.stream import check_block_size
from ...errors import TorchbendError
from ..options import (
    add_bend_options,
    add_model_options,
    block_size,
    device,
    port,
    sample_rate,
    seconds,
    subcommand,
)
from ..resolve import apply_bendings, bended_model

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = subcommand(sub, "live", "play a bended model on the sound card (needs torchbend[live])")
    add_model_options(p)
    add_bend_options(p)
    p.add_argument("--osc-port", type=port, help="UDP port of an OSC server for the controls")
    p.add_argument("--block-size", type=block_size, default=2048, help="samples per block")
    p.add_argument("--sample-rate", type=sample_rate, default=44100, help="in Hz")
    p.add_argument(
        "--input-device", type=device, help="sound card input (name or index; the default)"
    )
    p.add_argument(
        "--output-device", type=device, help="sound card output (name or index; the default)"
    )
    p.add_argument("--duration", type=seconds, help="seconds to play; until Ctrl-C without it")
    p.add_argument(
        "--no-safety",
        action="store_true",
        help="send the model's output to the card as it is, without the safety stage (NaN "
        "silenced, DC removed, soft limiter within [-1, 1])",
    )
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from ...audio.live import import_sounddevice, live

    sd = import_sounddevice()
    devices = {
        "input": _device_name(sd, "input", args.input_device, args.sample_rate),
        "output": _device_name(sd, "output", args.output_device, args.sample_rate),
    }
    if args.osc_port:
        _check_port(args.osc_port)
    model = bended_model(args)
    streams(model.module)
    check_block_size(args.block_size, ratio_of(model.module))
    trace_audio(model, args.fn, torch.zeros(1, 1, args.block_size))
    keys = apply_bendings(model, args)
    controls = model.controllables
    print(
        f"torchbend live: {args.model}.{args.fn}, blocks of {args.block_size} samples at "
        f"{args.sample_rate} Hz; input {devices['input']!r}, output {devices['output']!r}\n"
        f"  bent {len(keys)} target(s): {keys}\n"
        + (
            f"  OSC on 127.0.0.1:{args.osc_port}: /torchbend/<control> value, "
            "/torchbend/bend, /torchbend/reset\n"
            if args.osc_port is not None
            else "  no OSC (--osc-port to control it)\n"
        )
        + ("  no safety stage: the output goes to the card as it is\n" if args.no_safety else "")
        + "  controls: "
        + (", ".join(f"{name}={c.get()}" for name, c in controls.items()) or "none")
        + ("\n  Ctrl-C to stop" if args.duration is None else ""),
        flush=True,
    )
    stats = live(
        model,
        method=args.fn,
        input_device=args.input_device,
        output_device=args.output_device,
        block_size=args.block_size,
        sample_rate=args.sample_rate,
        osc_port=args.osc_port,
        duration=args.duration,
        safety=not args.no_safety,
    )
    print(stats)
    return 0


def _device_name(sd: Any, kind: str, device: int | str | None, sample_rate: int) -> str:
    """The name of the sound card ``device`` (``None``: the default), which must take one
    channel of float32 at ``sample_rate``; else an error listing the devices there are."""
    check = sd.check_input_settings if kind == "input" else sd.check_output_settings
    try:
        check(device=device, channels=1, dtype="float32", samplerate=sample_rate)
        return str(sd.query_devices(device, kind=kind)["name"])
    except Exception as e:  # sounddevice's PortAudioError, or ValueError for a name
        try:
            found = [f"{d['index']} {d['name']!r}" for d in sd.query_devices()]
        except Exception:
            found = []
        there = f"devices: {', '.join(found)}" if found else "no sound card was found here"
        which = "the default" if device is None else repr(device)
        raise TorchbendError(
            f"cannot open {which} {kind} device at {sample_rate} Hz ({e}); {there} "
            f"(choose one with --{kind}-device)"
        ) from None


def _check_port(port: int) -> None:
    """Fail before anything is loaded if the OSC server could not listen on ``port``."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as e:
            raise TorchbendError(
                f"--osc-port {port}: cannot listen on 127.0.0.1:{port} ({e.strerror}); give "
                "another port, or 0 for any free one"
            ) from None
