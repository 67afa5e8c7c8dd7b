"""Tutorial: one knob driving several bendings, swept across a sound block by block.

Run: python examples/04_controls_sweep.py [--out DIR] [--smoke]

Streams the sung line of ``assets/sounds`` through TinyDDSP, the character model
(``torchbend.models.load()``, in streaming mode), block by block, as a plugin host would,
while a ``tb.BendingParameter`` called ``depth`` rises from 0 to 1. It drives three bendings:
the weight of the decoder's first layer (which reads the latent) scaled up to twice, the
decoder's hidden layer clipped under a ceiling that falls from that layer's peak on this sound
(measured before the sweep) to 5 % of it, and the latent (pitch, loudness, timbre: the
channels ``model.latent_names`` lists) slowed down within each block; each change is ramped
over one block so it does not click. It writes the sweep (``sweep.wav``), the depth per block
(``depth.png``) and the bending configuration (``bending.json``), then applies that JSON to a
freshly loaded model, streams the same sweep and checks that the render is identical. Files go
to DIR (default ``out/examples/04``). ``--smoke`` crops the voice to one second.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

import torchbend as tb
from torchbend.audio import load as load_audio
from torchbend.audio import save
from torchbend.audio.safety import FILE_CEILING
from torchbend.audio.stream import Stream
from torchbend.models import load

REPO = Path(__file__).resolve().parents[1]
BLOCK = 2048  # samples per block: 46 ms at 44.1 kHz, 8 frames of the model's hop (256)
LATENT = "cat"  # TinyDDSP's latent in its forward: [1, 8, frames], its channels named
HIDDEN = "decoder_1"  # the decoder's first hidden layer, after its LeakyReLU: [1, 64, frames]


def streaming_model(block: int) -> tb.BendedModule:
    """TinyDDSP in streaming mode, wrapped and traced on one block."""
    model = load("tiny_ddsp")
    model.set_streaming(True)  # every stage carries its state from block to block
    bended = tb.BendedModule(model)
    bended.trace(x=torch.zeros(1, 1, block))  # trace at the block size we will stream
    model.reset_cache()  # tracing ran the model: start the stream from silence
    return bended


def hidden_peak(audio: torch.Tensor) -> float:
    """The largest value of the decoder's hidden layer over ``audio`` ([1, time]), unbent."""
    model = load("tiny_ddsp")  # offline: one call over the whole sound
    bended = tb.BendedModule(model)
    bended.trace(x=audio[None])
    with torch.no_grad():
        hidden = bended.get_activations(f"{HIDDEN}$", x=audio[None])[HIDDEN]
    return float(hidden.max())


def sweep(bended: tb.BendedModule, audio: torch.Tensor, depths: list[float]) -> torch.Tensor:
    """Stream ``audio`` ([1, time], a whole number of blocks), setting depth before each block."""
    stream = Stream(bended, block_size=BLOCK, sample_rate=44100)
    out = []
    with torch.no_grad():
        for block, depth in zip(audio.split(BLOCK, -1), depths):
            bended.update("depth", depth)  # no re-trace: ramped over the next block
            out.append(stream.process_block(block))
    print(f"  {stream.stats}")
    return torch.cat(out, -1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/04"))
    parser.add_argument("--smoke", action="store_true", help="one second of audio")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    audio, sr = load_audio(REPO / "assets/sounds/voice.wav", sample_rate=44100, mono=True)
    blocks = (sr if args.smoke else audio.shape[-1]) // BLOCK
    audio = audio[:, : blocks * BLOCK]
    depths = [i / max(1, blocks - 1) for i in range(blocks)]  # 0 -> 1, one value per block

    peak = hidden_peak(audio)
    print(f"the decoder's hidden layer peaks at {peak:.3f} on this sound, unbent")
    bended = streaming_model(BLOCK)
    # One knob, several bendings. Arithmetic on a control (1 + depth, 0.95 * depth) makes a
    # view that follows it; ramp=1 spreads each change over one block.
    depth = tb.BendingParameter("depth", 0.0, range=(0.0, 1.0), ramp=1)
    bended.bend(tb.Scale(1.0 + depth), r"decoder\.0\.weight")  # reads the latent, up to x2
    ceiling = peak * (1.0 - 0.95 * depth)  # from the layer's peak down to 5 % of it
    bended.bend(tb.Clamp(min=-ceiling, max=ceiling), f"{HIDDEN}$")
    bended.bend(tb.TimeStretch(1.0 - 0.5 * depth), f"{LATENT}$")  # the latent, slowed per block
    print("controls:", list(bended.controllables))

    # Save the preset before sweeping: the JSON keeps each control's current value, and a
    # stream started at another value would ramp from there on its first block.
    config = args.out / "bending.json"
    bended.bending_config().save(config)  # readable JSON: callbacks, arguments, controls
    print(f"wrote {config}")

    print("sweeping depth over", blocks, "blocks")
    y = sweep(bended, audio, depths)
    # For listening: the safety stage (a soft limiter within -0.3 dBFS), not a hard clip.
    safety = tb.audio.Safety(sr, ceiling=FILE_CEILING)
    print(f"wrote {save(args.out / 'sweep.wav', safety(y.detach()), sr)} ({safety.stats})")

    # A fresh model, the same bendings from the JSON, the same sweep: the same sound.
    again = streaming_model(BLOCK)
    again.bend(tb.BendingConfig.load(config))
    print("again, from", config.name)
    y_again = sweep(again, audio, depths)
    identical = torch.equal(y, y_again)
    print("render from the reloaded config is identical:", identical)
    if not identical:
        raise SystemExit("the reloaded bending config rendered another sound")

    fig, ax = plt.subplots(figsize=(6, 2.5))
    ax.step(range(blocks), depths, where="post")
    ax.set(xlabel=f"block ({BLOCK} samples)", ylabel="depth", title="the knob, per block")
    fig.tight_layout()
    fig.savefig(args.out / "depth.png", dpi=80)
    print(f"wrote {args.out / 'depth.png'}")


if __name__ == "__main__":
    main()
