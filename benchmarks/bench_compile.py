"""Per-call time of the compiled and scripted bended models against the plain module.

Run: cd benchmarks && python bench_compile.py [--quick]

Each model is bent (a masked activation and a scaled weight), then called eagerly, through
``torch.compile`` (inductor, CPU here) and through ``tb.export.torchscript(bended)`` (TorchScript).
"""

from __future__ import annotations

import argparse

import torch
from bench_call import ConvStack, interleaved

import torchbend as tb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| model | variant | median call | median ratio to plain eager (paired) |")
    print("|---|---|---|---|")
    for layers, channels, length, rounds in ((8, 32, 4096, 200), (16, 128, 16384, 20)):
        torch.manual_seed(0)
        model = ConvStack(layers, channels).eval()
        x = torch.randn(1, 1, length)
        bended = tb.BendedModule(model)
        bended.trace(x=x)
        bended.bend(tb.Mask(0.3, dim=-2, seed=0), "convs_3$")
        bended.bend(tb.Scale(0.5), r"convs\.2\.weight")
        variants = {
            "plain eager": model,
            "plain compiled": torch.compile(model),
            "bended eager": bended,
            "bended compiled": torch.compile(bended),
        }
        try:
            variants["bended scripted"] = tb.export.torchscript(bended)
        except Exception as e:  # the TorchScript export reports why; keep the other figures
            print(f"(tb.export.torchscript(bended) failed: {type(e).__name__}: {e})")
        with torch.inference_mode():
            med, ratio = interleaved(
                {k: (lambda m=m, x=x: m(x)) for k, m in variants.items()},
                3 if args.quick else rounds,
            )
        for k, t in med.items():
            label = f"conv {layers}x{channels}, [1, 1, {length}]"
            print(f"| {label} | {k} | {t * 1e3:.3f} ms | {ratio[k]:.3f}x |")


if __name__ == "__main__":
    main()
