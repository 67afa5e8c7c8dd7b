"""Train TinyRave on the sounds in assets/sounds/ and write its weights to assets/.

Run: python scripts/train_model.py [--time-limit 420] [--out assets/tiny_rave.safetensors]

Random crops of the first part of each sound, a multi-resolution STFT loss (spectral
convergence + log magnitude), Adam with a cosine learning-rate decay over the time limit. The
last ``--holdout`` seconds of each sound are never trained on: at the end the script prints
the multi-resolution spectral distance on them for the trained model and for the untrained one
(same seed), and writes the weights with the model's config in the safetensors metadata.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

from torchbend.audio import load
from torchbend.models import TinyRave

ROOT = Path(__file__).resolve().parents[1]
FFT_SIZES = (2048, 1024, 512, 256, 128)


def stft_magnitude(x: torch.Tensor, n_fft: int) -> torch.Tensor:
    """|STFT| of ``[batch, 1, time]`` audio, hop ``n_fft // 4``, Hann window."""
    window = torch.hann_window(n_fft, device=x.device)
    spec = torch.stft(x[:, 0], n_fft, n_fft // 4, window=window, return_complex=True)
    return spec.abs()


def spectral_distance(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Multi-resolution STFT distance: mean over FFT sizes of spectral convergence + log L1."""
    total = y.new_zeros(())
    for n_fft in FFT_SIZES:
        sy, sx = stft_magnitude(y, n_fft), stft_magnitude(x, n_fft)
        convergence = torch.linalg.norm(sy - sx) / torch.linalg.norm(sx).clamp_min(1e-7)
        log_mag = (torch.log(sy + 1e-5) - torch.log(sx + 1e-5)).abs().mean()
        total = total + convergence + log_mag
    return total / len(FFT_SIZES)


def evaluate(model: TinyRave, sounds: list[torch.Tensor]) -> float:
    """Mean spectral distance of the offline reconstructions of ``sounds`` ([1, time] each)."""
    model.eval()
    with torch.no_grad():
        scores = []
        for x in sounds:
            x = x[None, :, : x.shape[-1] // model.ratio * model.ratio]
            scores.append(float(spectral_distance(model(x), x)))
    return sum(scores) / len(scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sounds", type=Path, default=ROOT / "assets/sounds")
    parser.add_argument("--out", type=Path, default=ROOT / "assets/tiny_rave.safetensors")
    parser.add_argument("--time-limit", type=float, default=420.0, help="seconds of training")
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    parser.add_argument("--holdout", type=float, default=1.0, help="seconds held out per sound")
    parser.add_argument("--crop", type=int, default=16384, help="training crop, in samples")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.time_limit <= 0:
        parser.error(f"--time-limit must be positive, got {args.time_limit}")
    torch.set_num_threads(args.threads)

    paths = sorted(args.sounds.glob("*.wav"))
    if not paths:
        parser.error(f"no .wav files in {args.sounds}; run scripts/make_assets.py first")
    train, held = [], []
    for path in paths:
        audio, sr = load(path, sample_rate=44100, mono=True)
        cut = audio.shape[-1] - round(args.holdout * sr)
        if cut < args.crop:
            parser.error(f"{path.name} is too short for --holdout {args.holdout} and --crop")
        train.append(audio[:, :cut])
        held.append(audio[:, cut:])

    torch.manual_seed(args.seed)
    model = TinyRave()
    crop = args.crop // model.ratio * model.ratio
    before = evaluate(model, held)
    print(f"untrained: held-out spectral distance {before:.4f}")
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(args.seed)

    start = time.monotonic()
    step = 0
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= args.time_limit or (args.steps is not None and step >= args.steps):
            break
        frac = elapsed / args.time_limit
        for group in optimizer.param_groups:
            group["lr"] = args.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        batch = []
        for _ in range(args.batch):
            sound = train[int(torch.randint(len(train), (1,), generator=generator))]
            i = int(torch.randint(sound.shape[-1] - crop + 1, (1,), generator=generator))
            gain = 0.5 + 0.5 * float(torch.rand((), generator=generator))
            batch.append(sound[:, i : i + crop] * gain)
        x = torch.stack(batch)
        model.train()
        loss = spectral_distance(model(x), x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % 50 == 0:
            print(f"step {step:5d}  {elapsed:6.0f} s  loss {loss.item():.4f}", flush=True)

    after = evaluate(model, held)
    print(
        f"trained ({step} steps, {time.monotonic() - start:.0f} s): held-out spectral distance "
        f"{after:.4f} (untrained {before:.4f})"
    )
    metadata = {
        "config": json.dumps(model.config),
        "steps": str(step),
        "heldout_distance": f"{after:.4f}",
        "untrained_heldout_distance": f"{before:.4f}",
        "trained_on": ", ".join(p.name for p in paths),
        "torch": torch.__version__,
        "platform": platform.platform(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(args.out), metadata=metadata)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
