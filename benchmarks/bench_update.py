"""Cost of changing a control: update + next call, against a plain call of the module.

Run: python benchmarks/bench_update.py [--quick]

``update`` neither re-traces nor recompiles: an activation control is read by its callback at
the next call, a weight control recomputes only the weights it bends. For scale, the table also
shows what a re-trace + call would cost.
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
    rounds = 5 if args.quick else 200
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = ConvStack(8, 32).eval()
    x = torch.randn(1, 1, 4096)

    act = tb.BendedModule(model)
    act.trace(x=x)
    act.bend(tb.Scale(tb.BendingParameter("gain", 1.0)), "convs_3$")
    weight = tb.BendedModule(model)
    weight.trace(x=x)
    weight.bend(tb.Scale(tb.BendingParameter("gain", 1.0)), r"convs\.3\.weight")
    values = iter(float(v) for v in torch.rand(100000))

    def update_activation() -> None:
        act.update("gain", next(values))
        act(x)

    def update_weight() -> None:
        weight.update("gain", next(values))
        weight(x)

    def retrace() -> None:
        act.trace(x=x)
        act(x)

    with torch.inference_mode():
        med, ratio = interleaved(
            {
                "plain call": lambda: model(x),
                "bended call, no update (activation control)": lambda: act(x),
                "bended call, no update (weight control)": lambda: weight(x),
                "update (activation control) + call": update_activation,
                "update (weight control) + call": update_weight,
                "re-trace + call (for scale)": retrace,
            },
            rounds,
        )
    print("| conv 8x32, [1, 1, 4096], 1 thread | median | median ratio to plain call (paired) |")
    print("|---|---|---|")
    for name, t in med.items():
        print(f"| {name} | {t * 1e3:.3f} ms | {ratio[name]:.3f}x |")
    entries = len(act.graphs("forward"))
    print(f"\ngraphs of forward after {rounds} updates: {entries} (re-traces merged into one)")


if __name__ == "__main__":
    main()
