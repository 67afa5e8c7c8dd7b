"""Tutorial: trace modules that torch.fx refuses, and read the decisions baked into the graph.

Run: python examples/01_tracing_where_fx_fails.py [--out DIR] [--smoke]

The modules of torchbend's "extended tracing" notebook: ``Doug`` (recursion and loops over
shapes), ``LoopFoo`` (``range`` over an int argument), ``LogicalFoo`` (``if`` on tensor values),
``ShapeFoo`` (arithmetic with a shape) and ``Greg`` (a plain convolution, bent with ``Bias``, an
element ``Mask`` and a channel ``Mask``). For each, it prints what ``torch.fx.symbolic_trace``
says, then torchbend's graph and its flow steps, and writes them all to ``tracing.txt`` in DIR
(default ``out/examples/01``), with the activation table of ``Greg`` in ``greg.txt``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch import nn

import torchbend as tb


class Doug(nn.Module):
    """Recursion on the number of channels, a loop over the batch, ``sum`` of a list."""

    def __init__(self):
        super().__init__()
        self.conv_module = nn.Conv1d(1, 16, 3)
        self.batch_norm = nn.BatchNorm1d(16)

    def forward(self, x):
        if x.shape[1] > 1:
            return torch.cat([self.forward(x[:, [i]]) for i in range(x.shape[1])], -1)
        outs = []
        for i in range(x.shape[0]):
            outs.append(self.batch_norm(self.conv_module(x[[i]])))
        return sum(outs)


class LoopFoo(nn.Module):
    def forward(self, x, n: int):
        for _ in range(n):
            x = x * x
        return x


class LogicalFoo(nn.Module):
    def forward(self, x):
        if x.all():
            return 1
        return 0


class ShapeFoo(nn.Module):
    def forward(self, x):
        return x * x.shape[0]


class Greg(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_module = nn.Conv1d(1, 4, 3)

    def forward(self, x):
        return self.conv_module(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/01"))
    parser.add_argument("--smoke", action="store_true", help="fast mode (same steps here)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    report: list[str] = []

    def say(*lines: object) -> None:
        for line in lines:
            print(line)
            report.append(str(line))

    # Each case: a module and example inputs, given by argument name as trace() takes them.
    cases = [
        (Doug().eval(), {"x": torch.randn(1, 2, 16)}),
        (LoopFoo(), {"x": torch.tensor(2), "n": 4}),
        (LogicalFoo(), {"x": torch.tensor(0)}),
        (ShapeFoo(), {"x": torch.ones(4)}),
    ]
    for module, inputs in cases:
        say(f"== {type(module).__name__} ==")
        try:
            torch.fx.symbolic_trace(module)
            say("torch.fx: traced (no error)")
        except Exception as e:  # torch.fx raises TraceError, TypeError, RuntimeError...
            say(f"torch.fx: {type(e).__name__}: {e}")
        bended = tb.BendedModule(module)
        graph, out = bended.trace(return_out=True, **inputs)
        shown = f"tensor of shape {list(out.shape)}" if isinstance(out, torch.Tensor) else out
        say("torchbend graph:", graph, f"output: {shown}", f"flow steps: {graph.flow_steps}", "")

    # Inputs that take another decision get a graph of their own: Doug on 1 channel, not 2.
    doug = tb.BendedModule(Doug().eval())
    doug.trace(x=torch.randn(1, 2, 16))
    for shape in ([1, 1, 16], [3, 2, 16]):
        x = torch.randn(shape)
        same = torch.allclose(doug(x), doug.module(x))  # bended call == plain eager call
        say(f"Doug on {shape}: its own graph, same as eager: {same}")
    say("")
    # ShapeFoo reads x.shape[0] as an int: a longer input is traced again, not silently wrong.
    shape_foo = tb.BendedModule(ShapeFoo())
    shape_foo.trace(x=torch.ones(4))
    say(f"ShapeFoo(ones(6)) = {shape_foo(torch.ones(6)).tolist()}", "")

    # Greg: bending an activation. A Bias fits any shape; an element mask is drawn for the
    # traced shape only; a channel mask (dim=-2) broadcasts over batch and time.
    say("== Greg, bent ==")
    greg = tb.BendedModule(Greg())
    x = torch.randn(1, 1, 16)
    greg.trace(x=x)
    greg.print_activations(out=args.out / "greg.txt")
    for label, callback in [
        ("Bias(1.)", tb.Bias(1.0)),
        ("Mask(0.3)", tb.Mask(0.3, seed=0)),
        ("Mask(0.3, dim=-2)", tb.Mask(prob=0.3, dim=-2, seed=1)),
    ]:
        greg.reset()
        greg.bend(callback, "conv_module$")
        y = greg(x)
        try:
            other = f"ok, {list(greg(torch.randn(4, 1, 32)).shape)}"
        except tb.TorchbendError as e:
            other = f"{type(e).__name__}: {e}"
        say(f"{label}: zeros in output {int((y == 0).sum())} / {y.numel()}; [4, 1, 32]: {other}")

    (args.out / "tracing.txt").write_text("\n".join(report) + "\n")
    print(f"wrote {args.out / 'tracing.txt'} and {args.out / 'greg.txt'}")


if __name__ == "__main__":
    main()
