"""The demo: the shipped character model bent several ways on the shipped sounds, with a walk
over its named latent channels, measured, rendered to files and drawn."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from ..audio.safety import FILE_CEILING, Safety
from ..audio.safety_stats import SafetyStats, decibels
from ..bended import BendedModule
from ..callbacks import BendingCallback, Permute, Scale
from ..errors import TorchbendError
from .latent_walk import WALKS, OnChannel, walk_control
from .listening import Heard, bending_table, hear, walk_table
from .spectrograms import picture

__all__ = ["BENDINGS", "MODEL", "SOUNDS", "run_demo"]

SOUNDS = Path(__file__).resolve().parents[2] / "assets" / "sounds"

MODEL = "tiny_ddsp"
"""The shipped model the demo bends: the one with character (docs/model.md)."""

BENDINGS = {
    "reconstruction": "none: the model unbent, resynthesizing the input (compare with it)",
    "fifth_up": "OnChannel(0, bias=7/12) on the latent: its pitch channel a fifth up (+7 "
    "semitones); the decoder reads the new pitch, so the timbre follows it",
    "whisper": "OnChannel(3, scale=0, bias=1) on the latent: its noisiness channel set to 1 "
    "(noise) in every frame: a slow noise multiplies every harmonic, which spreads each into "
    "a band of noise around its place: a breathy whisper of the same colour (the "
    "harmonic-to-noise ratio falls, the centroid stays), whose pitch fades",
    "brighter": "OnChannel(2, bias=1.5) on the latent: its brightness channel up 1.5, the "
    "spectrum tilted up (9 dB more an octave): the centroid rises, the pitch stays",
    "scrambled_timbre": "Permute(dim=-2, seed=0) on the decoder's output (decoder_6): the power "
    "meant for each harmonic and noise band goes to another: a new timbre, noisier, whose "
    "loudest harmonic may not be the fundamental (the pitch heard can jump)",
    "flipped_timbre": "Scale(-1) on the learned timbre channels (encoder_3): the decoder reads "
    "the opposite timbre for each frame; its pitch and loudness channels are untouched",
}
"""What each bending does, as the table the demo prints measures it."""

_BLOCK = 2048
"""Samples per block of the streamed renders."""


def _latent_node(bended: BendedModule, size: int) -> str:
    """The activation of ``forward`` that holds the latent: the first with ``size`` channels."""
    for info in bended.activations("forward"):
        if info.is_tensor and len(info.shape) == 3 and info.shape[1] == size:
            return info.name
    raise TorchbendError(f"the demo's model has no activation of {size} channels (its latent)")


def _setups(latent: str, names: list[str]) -> dict[str, list[tuple[BendingCallback, str]]]:
    on, channel = f"{latent}$", names.index
    return {
        "reconstruction": [],
        "fifth_up": [(OnChannel(channel("pitch"), bias=7 / 12), on)],
        "whisper": [(OnChannel(channel("noisiness"), scale=0.0, bias=1.0), on)],
        "brighter": [(OnChannel(channel("brightness"), bias=1.5), on)],
        "scrambled_timbre": [(Permute(dim=-2, seed=0), "decoder_6$")],
        "flipped_timbre": [(Scale(-1.0), "encoder_3$")],
    }


def _load_sounds(rate: int, ratio: int, seconds: float | None) -> dict[str, torch.Tensor]:
    from ..audio import load

    sounds = {}
    for path in sorted(SOUNDS.glob("*.wav")):
        audio, _ = load(path, sample_rate=rate, mono=True)
        if seconds is not None:
            audio = audio[:, : int(seconds * rate)]
        sounds[path.stem] = audio[:, : audio.shape[-1] // ratio * ratio]
    if not sounds:
        raise FileNotFoundError(f"no sounds in {SOUNDS}; run scripts/make_assets.py")
    return sounds


def run_demo(
    out: Path, seconds: float | None = None, safety: bool = True
) -> dict[str, dict[str, torch.Tensor]]:
    """Bend the shipped character model on the shipped sounds; write WAVs and a picture to
    ``out`` and print what each bending does, measured.

    Each bending of :data:`BENDINGS` is rendered, then a walk over the latent's named
    channels (:data:`~torchbend.demo.latent_walk.WALKS`): one render a channel, moved
    from its walk's start to its end across the file by a control updated before each
    block. ``seconds`` crops the sounds (for quick runs). With ``safety`` (the default: the
    files are for listening), each render goes through the safety stage of live play
    (:class:`~torchbend.audio.Safety`), and what it did is printed; without, the model's
    output is written as it is. Returns the renders by sound and variant, as written.
    """
    # One thread: the model runs small tensors a frame at a time, where torch's threads cost
    # more than they give, and far more on a machine whose cores are busy.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(out, seconds, safety)
    finally:
        torch.set_num_threads(previous)


def _run(out: Path, seconds: float | None, safety: bool) -> dict[str, dict[str, torch.Tensor]]:
    from .. import models
    from ..audio import save
    from ..audio.stream import Stream

    out.mkdir(parents=True, exist_ok=True)
    model = models.load(MODEL)
    assert isinstance(model, models.TinyDDSP)
    model.set_streaming(True)  # read before tracing: the graph keeps the streaming branch
    rate = int(getattr(model, "sample_rate", 44100))
    names = list(getattr(model, "latent_names", []))
    sounds = _load_sounds(rate, int(getattr(model, "ratio", 1)), seconds)

    bended = BendedModule(model)
    example = next(iter(sounds.values()))[None, :, :_BLOCK]
    print(f"Tracing {MODEL} on a {_BLOCK}-sample block...", flush=True)
    bended.trace("forward", x=example)
    latent = _latent_node(bended, len(names))
    bended.mark("latent", latent)
    print(f"Activations of {MODEL}'s forward (its layers, and its latent, #latent):")
    bended.print_activations(exclude=[r"^getitem", r"^cat_"])

    setups = _setups(latent, names)
    position = walk_control()
    for walk in WALKS:
        channel = walk.callback(names.index(walk.channel), position)
        setups[f"walk_{walk.channel}"] = [(channel, f"{latent}$")]

    renders: dict[str, dict[str, torch.Tensor]] = {name: {"input": a} for name, a in sounds.items()}
    written = []
    for name, audio in sounds.items():
        written.append(out / f"{name}_input.wav")
        save(written[-1], audio, rate)

    def walking(i: int, count: int) -> None:
        bended.update("walk", -1.0 + 2.0 * i / max(count - 1, 1))

    timings: dict[str, float] = {}
    acted: list[tuple[str, SafetyStats]] = []
    peaks: list[float] = []
    with torch.inference_mode():
        for label, todo in setups.items():
            bended.reset()
            for cb, pattern in todo:
                bended.bend(cb, pattern)
            for name, audio in sounds.items():
                print(f"  rendering {name} ({label.replace('_', ' ')})...", end="", flush=True)
                stage = Safety(rate, ceiling=FILE_CEILING) if safety else False
                stream = Stream(
                    bended, method="forward", block_size=_BLOCK, sample_rate=rate, safety=stage
                )
                stream.reset()
                before: Callable[[int, int], None] | None = None
                if label.startswith("walk_"):
                    bended.update("walk", -1.0, ramp=False)  # no ramp left from the last sound
                    before = walking
                y = stream.process(audio, before_block=before)
                renders[name][label] = y
                stats = stream.stats.safety
                if stats is not None:
                    peaks.append(stats.peak)
                    if stats.acted:
                        acted.append((f"{name} ({label})", stats))
                print(f" {stats}" if stats is not None and stats.acted else "", flush=True)
                written.append(out / f"{name}_{label}.wav")
                save(written[-1], y, rate)
                timings[label] = stream.stats.realtime_factor
    bended.reset()
    title = (
        f"torchbend demo: {MODEL} on the shipped sounds: the input, its reconstruction, "
        f"{len(BENDINGS) - 1} bendings and a walk over the latent's named channels"
    )
    picture(renders, out / "spectrograms.png", rate, title)
    _report(renders, rate, safety, acted, peaks, timings)
    print(f"\nWrote {len(written)} WAV files and spectrograms.png to {out}/")
    return renders


def _report(
    renders: dict[str, dict[str, torch.Tensor]],
    rate: int,
    safety: bool,
    acted: list[tuple[str, SafetyStats]],
    peaks: list[float],
    timings: dict[str, float],
) -> None:
    heard: dict[str, dict[str, Heard]] = {
        sound: {label: hear(y, rate) for label, y in by.items() if label != "input"}
        for sound, by in renders.items()
    }
    print("\nBendings:")
    for label, text in BENDINGS.items():
        print(f"  {label:>20}: {text}")
    for walk in WALKS:
        print(
            f"  {'walk_' + walk.channel:>20}: OnChannel on the latent's {walk.channel} channel, "
            f"{walk.describe()}"
        )
    bendings = [label for label in BENDINGS if label != "reconstruction"]
    print(
        "\nWhat each bending does to the sound, measured against the reconstruction, frame by "
        "frame (median over the sounds; pitch where both are pitched; distance: spectral "
        "distance, to the reconstruction and to the nearest other bending):"
    )
    print(bending_table(heard, renders, bendings, rate))
    print("\nWhat the walk does, from the start of each file to its end (median over the sounds):")
    print(walk_table(heard, [f"walk_{walk.channel}" for walk in WALKS]))
    if safety:
        deepest = max((stats.max_reduction_db for _, stats in acted), default=0.0)
        longest = max((stats.limited_seconds for _, stats in acted), default=0.0)
        print(
            f"\nSafety stage (a limiter within {decibels(FILE_CEILING)}, as the files are "
            f"written): the loudest render peaked at {decibels(max(peaks, default=0.0))} before "
            f"it; it limited {len(acted)} of {len(peaks)} renders, by {deepest:.1f} dB at most, "
            f"for {1000 * longest:.0f} ms at most; no file clips"
        )
    print(f"\nRealtime factor of the streamed renders (block {_BLOCK}):")
    for label, factor in timings.items():
        print(f"  {label:>20}: {factor:.1f}x realtime")
