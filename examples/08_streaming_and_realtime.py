"""Tutorial: stream a bent model block by block and measure whether it keeps up in real time.

Run: python examples/08_streaming_and_realtime.py [--out DIR] [--smoke]

Runs TinyDDSP (``torchbend.models.load("tiny_ddsp")``, streaming mode, bent) through
``torchbend.audio.stream.Stream`` at several block sizes, on the mono drum loop and on a
stereo file made of the drums (left) and the bass (right), each channel a batch item of the
mono model. For each it prints the realtime factor, the latency and the overruns (blocks
that took longer than they last) into ``realtime.txt``, checks that streaming gives what one
offline call gives, and writes the renders (``mono_<block>.wav``, ``stereo_<block>.wav``) to
DIR (default ``out/examples/08``). ``--smoke`` streams one second at two block sizes.

The bending drives the model past full scale, so the stream ends with the safety stage of live
play (NaN silenced, DC removed, a soft limiter, here within -0.3 dBFS) and the script
prints what it did; ``--no-safety`` writes the model's output as it is (clipped by the file).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import torchbend as tb
from torchbend.audio import load as load_audio
from torchbend.audio import save
from torchbend.audio.safety import FILE_CEILING
from torchbend.audio.stream import Stream
from torchbend.models import load

REPO = Path(__file__).resolve().parents[1]


def bent_stream(block: int, batch: int, safety: bool) -> tuple[tb.BendedModule, Stream]:
    """A streaming, bent TinyDDSP traced for ``batch`` channels of ``block`` samples."""
    model = load("tiny_ddsp").set_streaming(True)
    silence = torch.zeros(batch, 1, block)
    with torch.no_grad():
        model(silence)  # size the caches for this batch before tracing
    bended = tb.BendedModule(model)
    bended.trace(x=silence)
    bended.bend(tb.SoftClip(drive=3.0), "decoder_0$")
    bended.bend(tb.Scale(1.3), r"decoder\.0\.weight")
    # channels=1: a mono model; a stereo input runs as a batch of two.
    # The safety stage for a file to listen to: within -0.3 dBFS (live play's is full scale).
    stage = tb.audio.Safety(model.sample_rate, ceiling=FILE_CEILING) if safety else False
    stream = Stream(
        bended, block_size=block, sample_rate=model.sample_rate, channels=1, safety=stage
    )
    return bended, stream


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/08"))
    parser.add_argument("--smoke", action="store_true", help="one second, two block sizes")
    parser.add_argument(
        "--no-safety", action="store_true", help="write the model's output without a limiter"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # as in an audio thread: one core

    sr = 44100
    length = sr if args.smoke else 4 * sr
    sound = {
        name: load_audio(REPO / f"assets/sounds/{name}.wav", sample_rate=sr, mono=True)[0]
        for name in ("drums", "bass")
    }
    inputs = {
        "mono": sound["drums"][:, :length],  # [1, time]
        "stereo": torch.cat([sound["drums"], sound["bass"]])[:, :length],  # [2, time]
    }
    blocks = (512, 2048) if args.smoke else (256, 512, 1024, 2048, 4096)

    lines = []
    for name, audio in inputs.items():
        for block in blocks:
            bended, stream = bent_stream(block, audio.shape[0], safety=not args.no_safety)
            stream.reset()  # start from silence: clears the model's caches (and the timings)
            with torch.no_grad():
                y = stream.process(audio)  # any length: the last block is padded, then trimmed
                # Streaming gives what one offline call on the whole sound gives.
                bended.module.reset_cache()
                whole = torch.nn.functional.pad(audio, (0, -length % block))[:, None]
                offline = bended(whole)
                if stream.safety is not None:  # the same stage, in one pass after the model
                    offline = tb.audio.Safety(sr, ceiling=FILE_CEILING)(offline)
                offline = offline[:, 0, :length]
            s = stream.stats
            lines.append(
                f"{name:6} block {block:5}: {s.realtime_factor:6.1f}x realtime, latency "
                f"{s.latency_ms:6.1f} ms, {s.overruns} overruns of {s.blocks} blocks, "
                f"max |stream - offline| {(y - offline).abs().max():.1e}"
            )
            print(lines[-1])
            if s.safety is not None:
                print(f"    {s.safety}")
            save(args.out / f"{name}_{block}.wav", y, sr)

    (args.out / "realtime.txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / 'realtime.txt'} and {2 * len(blocks)} WAVs to {args.out}")


if __name__ == "__main__":
    main()
