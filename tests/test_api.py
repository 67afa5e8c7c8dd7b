"""The public API, names and signatures, against a snapshot: changes to it are deliberate.

After a deliberate change, regenerate the snapshot and commit it with the change:
``python tests/test_api.py --update``.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import torchbend as tb

SNAPSHOT = Path(__file__).with_name("api_snapshot.txt")
MODULES = ("torchbend", "torchbend.audio", "torchbend.export", "torchbend.models")


def _members(obj: object) -> list[tuple[str, object]]:
    own = [
        (name, value)
        for name, value in vars(obj).items()
        if not name.startswith("_") or name in ("__init__", "__call__")
    ]
    return sorted(own, key=lambda item: item[0])


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"


def describe() -> list[str]:
    """One line per public name: functions and classes with signatures, classes' own members."""
    lines: list[str] = []
    for module_name in MODULES:
        module = sys.modules[module_name] if module_name in sys.modules else None
        module = module or __import__(module_name, fromlist=["_"])
        for name in sorted(module.__all__):
            value = getattr(module, name)
            where = f"{module_name}.{name}"
            if inspect.isclass(value):
                bases = ", ".join(b.__name__ for b in value.__bases__)
                lines.append(f"class {where}({bases})")
                for member, attr in _members(value):
                    if isinstance(attr, property):
                        lines.append(f"    {member}: property")
                    elif isinstance(attr, (staticmethod, classmethod)):
                        lines.append(f"    {member}{_signature(attr.__func__)}")
                    elif inspect.isfunction(attr):
                        lines.append(f"    {member}{_signature(attr)}")
            elif inspect.isfunction(value):
                lines.append(f"def {where}{_signature(value)}")
            elif inspect.ismodule(value):
                lines.append(f"module {where}")
            else:
                lines.append(f"{where}: {type(value).__name__}")
    return lines


def test_public_api_matches_its_snapshot():
    assert tb.__version__
    expected = SNAPSHOT.read_text().splitlines()
    got = describe()
    if got != expected:
        import difflib

        diff = "\n".join(difflib.unified_diff(expected, got, "snapshot", "now", lineterm=""))
        raise AssertionError(
            "the public API changed; if that is deliberate, run "
            f"`python tests/test_api.py --update` and commit the snapshot:\n{diff}"
        )


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_api.py --update")
    SNAPSHOT.write_text("\n".join(describe()) + "\n")
    print(f"wrote {SNAPSHOT} ({len(describe())} lines)")
