"""Tutorial: trace, bend and export TensorDict modules (tensordict's own tutorial models).

Run: python examples/09_tensordict.py [--out DIR] [--smoke]

Needs tensordict (``pip install "torchbend[tensordict]"``). Three models from tensordict's
tracing and export tutorials, each wrapped in a ``BendedModule``:

1. a ``TensorDictSequential`` reading and writing nested keys (``("input", "x")`` ->
   ``("intermediate", "x")`` -> ``("output", "probabilities")``): traced with a TensorDict,
   compared with the module, bent on a weight and on an activation;
2. the export tutorial's model (Linear, ReLU, Linear, ``NormalParamExtractor``): bent, then
   exported with keyword inputs by ``tb.export.pt2(bended, path, x=x)`` and reloaded;
3. two lambda modules on a nested input key, exported with the key joined by ``_``
   (``some_key=...``), as tensordict's ``dispatch`` does.

It writes the graphs to ``tensordict.txt``, the first model's activations to
``activations.txt`` and the programs to ``tutorial.pt2`` and ``nested.pt2`` in DIR (default
``out/examples/09``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor
from tensordict.nn import TensorDictModule as Mod
from tensordict.nn import TensorDictSequential as Seq
from torch import nn

import torchbend as tb


class Net(nn.Module):
    def __init__(self, input_size=100, hidden_size=50, output_size=10):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.fc2 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Masker(nn.Module):
    def forward(self, x, mask):
        return torch.softmax(x * mask, dim=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/09"))
    parser.add_argument("--smoke", action="store_true", help="(same steps: the models are tiny)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    report: list[str] = []

    # 1. Nested keys, TensorDict in and out.
    net = Mod(Net(), in_keys=[("input", "x")], out_keys=[("intermediate", "x")])
    masker = Mod(
        Masker(),
        in_keys=[("intermediate", "x"), ("input", "mask")],
        out_keys=[("output", "probabilities")],
    )
    module = Seq(net, masker)
    td = TensorDict(
        {"input": {"x": torch.rand(32, 100), "mask": torch.randint(0, 2, (32, 10))}}, [32]
    )
    bended = tb.BendedModule(module)
    graph = bended.trace(tensordict=td.clone())
    out = bended(td.clone())  # a TensorDict, like the module's
    key = ("output", "probabilities")
    same = torch.equal(out[key], module(td.clone())[key])
    report += ["== TensorDictSequential, nested keys ==", str(graph)]
    bended.print_activations(out=args.out / "activations.txt")  # node names to bend
    report.append(f"bended == module: {same}")
    bended.bend(tb.Scale(0.0), r"module\.0\.module\.fc2\.bias")  # a weight, by its dotted name
    bended.bend(tb.Mask(prob=0.5, dim=-1, seed=0), "module_0_module_fc1$")  # half the units
    probs = bended(td.clone())["output", "probabilities"]
    report.append(f"bent {bended.bended_keys()}: item 0 -> {probs[0].detach().numpy().round(3)}")

    # 2. The export tutorial's model: bend it, export it with keyword inputs, reload it.
    model = Seq(
        Mod(nn.Linear(3, 4), in_keys=["x"], out_keys=["hidden"]),
        Mod(nn.ReLU(), in_keys=["hidden"], out_keys=["hidden"]),
        Mod(nn.Linear(4, 4), in_keys=["hidden"], out_keys=["latent"]),
        Mod(NormalParamExtractor(), in_keys=["latent"], out_keys=["loc", "scale"]),
    )
    x = torch.randn(1, 3)
    tutorial = tb.BendedModule(model)
    tutorial.trace(tensordict=TensorDict({"x": x}, [1]))
    tutorial.bend(tb.Noise(std=0.5, seed=0), r"module\.2\.module\.weight")
    path = args.out / "tutorial.pt2"
    tb.export.pt2(tutorial, path, x=x)  # keyword inputs: the module's in_keys
    exported = torch.export.load(str(path)).module()
    outputs = exported(x=x)  # the out_keys, in order, as a tuple
    expected = tutorial(TensorDict({"x": x}, [1]))
    report += ["== export tutorial model ==", str(exported.code)]
    for key, value in zip(model.out_keys, outputs):
        report.append(f"exported {key} == bended {key}: {torch.allclose(value, expected[key])}")

    # 3. Nested input key: the keyword is the key joined with "_".
    nested = tb.BendedModule(
        Seq(
            Mod(lambda x: x + 1, in_keys=[("some", "key")], out_keys=["hidden"]),
            Mod(lambda x: x - 1, in_keys=["hidden"], out_keys=[("some", "output")]),
        ).select_out_keys(("some", "output"))
    )
    nested.trace(tensordict=TensorDict({"some": {"key": x}}, [1]))
    nested.bend(tb.Scale(2.0), "add$")  # (x + 1) * 2 - 1
    path_nested = args.out / "nested.pt2"
    tb.export.pt2(nested, path_nested, some_key=x)
    y = torch.export.load(str(path_nested)).module()(some_key=x)
    report += ["== nested keys ==", f"exported (x + 1) * 2 - 1: {torch.allclose(y, 2 * x + 1)}"]

    print("\n".join(report))
    (args.out / "tensordict.txt").write_text("\n".join(report) + "\n")
    print(f"wrote {args.out / 'tensordict.txt'}, {path} and {path_nested}")


if __name__ == "__main__":
    main()
