"""What each subcommand of ``torchbend`` does, once its arguments are parsed."""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path
from typing import Any

import torch

from ..audio.render import STREAM_BLOCK, padded, ratio_of, render, streams, trace_audio
from ..audio.stream import check_block_size
from ..bended import BendedModule
from ..config import BendingConfig
from ..errors import TorchbendError
from .resolve import load_model, output_path, parse_bend

__all__ = [
    "cmd_bend",
    "cmd_callbacks",
    "cmd_check",
    "cmd_demo",
    "cmd_export",
    "cmd_inspect",
    "cmd_live",
    "cmd_models",
    "shows_progress",
]


def shows_progress(args: argparse.Namespace) -> bool:
    """A progress bar is drawn on a terminal, unless --quiet: never into a log file."""
    return not args.quiet and sys.stderr.isatty()


def _bended(args: argparse.Namespace) -> BendedModule:
    return BendedModule(load_model(args.model, getattr(args, "checkpoint", None)))


def _apply_bendings(bended: BendedModule, args: argparse.Namespace) -> list[str]:
    from ..callbacks.loading import load_callbacks

    for path in getattr(args, "plugins", None) or []:
        load_callbacks(path)  # the user's own callbacks, which a configuration may name
    for spec in getattr(args, "mark", None) or []:
        alias, _, target = spec.partition("=")
        if not target:
            raise TorchbendError(
                f"--mark takes NAME=TARGET (such as latent=encoder_11), got {spec!r}"
            )
        bended.mark(alias, target)
    keys: list[str] = []
    if getattr(args, "config", None):
        keys += bended.bend(BendingConfig.load(args.config))
    for spec in getattr(args, "bend", None) or []:
        cb, pattern = parse_bend(spec)
        keys += bended.bend(cb, pattern)
    return keys


def _example(args: argparse.Namespace, bended: BendedModule) -> torch.Tensor:
    if getattr(args, "audio", None):
        from ..audio import load

        sample_rate = getattr(bended.module, "sample_rate", None)
        audio, _ = load(args.audio, sample_rate=sample_rate, mono=True)
        return padded(audio, ratio_of(bended.module))
    return torch.randn(*args.input, generator=torch.Generator().manual_seed(0))


def cmd_inspect(args: argparse.Namespace) -> int:
    model = _bended(args)
    x = _example(args, model)
    trace_audio(model, args.fn, x)
    model.print_weights()
    print()
    model.print_activations(args.fn)
    return 0


def _channels(audio: torch.Tensor, choice: str, path: str) -> torch.Tensor:
    """The channels of ``audio`` that ``--channels`` picks: ``mix`` (one, their average),
    ``all``, or one by its index."""
    from ..audio.io import downmix

    if choice == "mix":
        return downmix(audio, Path(path).name)
    if choice == "all":
        return audio
    index = int(choice)
    if index >= audio.shape[0]:
        raise TorchbendError(
            f"--channels {index}: {path} has {audio.shape[0]} channel(s), give 0 to "
            f"{audio.shape[0] - 1}, 'mix' or 'all'"
        )
    return audio[index : index + 1]


def cmd_bend(args: argparse.Namespace) -> int:
    from ..audio import load, save
    from ..audio.io import FORMATS
    from ..audio.safety import FILE_CEILING, Safety
    from ..audio.safety_stats import decibels

    out_path = output_path(args.output, "OUTPUT", tuple(FORMATS))
    model = _bended(args)
    sample_rate = int(getattr(model.module, "sample_rate", 44100))
    audio, sr = load(args.input, sample_rate=sample_rate)
    audio = _channels(audio, args.channels, args.input)
    # A model that streams runs by blocks with its state carried over; any other in one pass
    # (or by the blocks asked for).
    block = args.block_size
    if streams(model.module) and block is None:
        block = STREAM_BLOCK
    if block is not None:
        check_block_size(block, ratio_of(model.module))
    x = torch.zeros(1, 1, block) if block is not None else padded(audio[:1], ratio_of(model.module))
    trace_audio(model, args.fn, x)
    keys = _apply_bendings(model, args)
    print(f"bent {len(keys)} target(s): {keys}", file=sys.stderr)

    def progress(i: int, count: int) -> None:
        bar = "#" * int(30 * i / count)
        print(f"\r[{bar:<30}] {i / count:4.0%}", end="", file=sys.stderr, flush=True)

    safety = Safety(sr, ceiling=FILE_CEILING) if args.safety else False
    shown = shows_progress(args)
    out, how = render(model, audio, sr, args.fn, block, progress if shown else None, safety=safety)
    if shown and block is not None:
        print(f"\r[{'#' * 30}] 100%", file=sys.stderr)
    save(out_path, out, sr)
    peak = float(out.abs().max())
    print(f"wrote {args.output} ({how}; peak {decibels(peak)})", file=sys.stderr)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .. import export

    out_path = output_path(args.output, "--output")
    model = _bended(args)
    if isinstance(model.module, torch.jit.ScriptModule):
        raise TorchbendError(
            "export takes a Python model (a shipped name or module:factory), not a TorchScript "
            "file: bend a TorchScript file with `torchbend bend`, or from Python"
        )
    if args.format == "nntilde":
        streams(model.module)  # nn~ calls it buffer by buffer, its state carried over
    x = _example(args, model)
    trace_audio(model, args.fn, x)
    keys = _apply_bendings(model, args)
    print(f"bent {len(keys)} target(s)", file=sys.stderr)
    inputs: dict[str, Any] = {model.view().signature(args.fn).names[0]: x}
    if args.format == "nntilde":
        sample_rate = int(getattr(model.module, "sample_rate", 44100))
        export.nntilde(model, out_path, methods=(args.fn,), sample_rate=sample_rate)
    elif args.format == "torchscript":
        export.torchscript(model, out_path)
    elif args.format == "pt2":
        export.pt2(model, out_path, fn=args.fn, **inputs)
    else:
        export.onnx(model, out_path, fn=args.fn, **inputs)
    print(f"wrote {args.output}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ..export import check_nntilde

    if not Path(args.file).is_file():
        raise TorchbendError(f"no file {args.file!r}")
    print(check_nntilde(args.file))
    return 0


def cmd_live(args: argparse.Namespace) -> int:
    from ..audio.live import import_sounddevice, live

    sd = import_sounddevice()
    devices = {
        "input": _device_name(sd, "input", args.input_device, args.sample_rate),
        "output": _device_name(sd, "output", args.output_device, args.sample_rate),
    }
    if args.osc_port:
        _check_port(args.osc_port)
    model = _bended(args)
    streams(model.module)
    check_block_size(args.block_size, ratio_of(model.module))
    trace_audio(model, args.fn, torch.zeros(1, 1, args.block_size))
    keys = _apply_bendings(model, args)
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


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    run_demo(Path(args.out), safety=args.safety)
    return 0


def _summary(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def cmd_callbacks(args: argparse.Namespace) -> int:
    from ..callbacks.registry import ALIASES, CALLBACKS

    for name, cls in sorted(CALLBACKS.items()):
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
        aliases = [a for a, c in ALIASES.items() if c is cls]
        also = f" (also {', '.join(aliases)})" if aliases else ""
        shown = ", ".join(_parameter(p) for p in parameters)
        print(f"{name}({shown}){also}\n    {_summary(cls)}")
    return 0


def _parameter(p: inspect.Parameter) -> str:
    """``prob: float | Control = 0.3``, whether the module annotates with strings or not."""
    text = p.name
    if p.annotation is not p.empty:
        annotation = p.annotation
        if not isinstance(annotation, str):
            annotation = inspect.formatannotation(annotation)
        for long, short in [
            ("torchbend.controls.BendingParameter | torchbend.controls.ControlView", "Control"),
            ("collections.abc.", ""),
            ("typing.", ""),
        ]:
            annotation = annotation.replace(long, short)
        text += f": {annotation}"
    if p.default is not p.empty:
        text += f" = {p.default!r}"
    return text


def cmd_models(args: argparse.Namespace) -> int:
    from ..models.loading import MODELS, default_weights

    for name, cls in sorted(MODELS.items()):
        weights = default_weights(name)
        state = str(weights) if weights.is_file() else f"{weights} (missing)"
        print(f"{name}: {cls.__module__}.{cls.__name__}, weights {state}\n    {_summary(cls)}")
    return 0
