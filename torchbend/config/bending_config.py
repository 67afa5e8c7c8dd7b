"""Bending configurations: an ordered list of (callback, patterns), saved as readable JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..callbacks.base import BendingCallback
from ..callbacks.bend_options import Guard, Subset, Window
from ..controls import BendingParameter, TensorParameter, Widget, control_of, is_control
from ..errors import BendingError
from .callback_codec import callback_dict, callback_from_dict, decode, encode
from .schema import FORMAT, VERSION, check
from .tensors import SideFile
from .validate import parse

__all__ = ["BendingConfig", "ConfigItem"]


@dataclass
class ConfigItem:
    """One bending of a configuration."""

    callback: BendingCallback
    patterns: tuple[str, ...]
    """Regular expressions selecting targets (see ``BendedModule.bend``)."""
    fn: str | tuple[str, ...] | None = None
    """Methods the patterns are restricted to, if any."""
    keys: list[str] = field(default_factory=list)
    """Targets the patterns matched, for a config taken from a module."""
    options: dict[str, Any] = field(default_factory=dict)
    """How the callback applies: ``blend``, ``subset``, ``window``, ``guard``, as
    ``BendedModule.bend`` takes them (see :mod:`torchbend.engine.shaping`)."""


class BendingConfig:
    """An ordered list of bendings: callbacks (with their arguments and controls) and the
    patterns they bend. Build one by hand, get one from ``bended.bending_config()``, apply one
    with ``bended.bend(config)``, save it to JSON and load it back.

    Example:
        >>> import torchbend as tb
        >>> config = tb.BendingConfig(
        ...     (tb.Scale(2.), "conv$"), (tb.Mask(0.5, seed=0), "lin.*", "out$")
        ... )
        >>> len(config), config.items[1].patterns
        (2, ('lin.*', 'out$'))

    Notes:
        Saved files hold class references and plain values, never pickles: loading a file from
        someone else runs no code of theirs. Classes are found among torchbend's own (by name)
        and in modules already imported (``module:Class``); loading never imports a module
        the file names unless ``allow`` lists it.
    """

    def __init__(self, *items: tuple[Any, ...] | ConfigItem) -> None:
        self.items: list[ConfigItem] = []
        self.aliases: dict[str, str] = {}
        """Names given to targets (``BendedModule.mark``), which ``"#name"`` patterns use."""
        for item in items:
            if isinstance(item, ConfigItem):
                self.items.append(item)
                continue
            if not isinstance(item, tuple) or len(item) < 2:
                raise BendingError(
                    f"BendingConfig takes (callback, pattern, ...) tuples, got {item!r}"
                )
            callback, *patterns = item
            if not isinstance(callback, BendingCallback):
                raise BendingError(
                    f"BendingConfig: first element of {item!r} must be a BendingCallback, got "
                    f"{type(callback).__name__}"
                )
            if not all(isinstance(p, str) for p in patterns):
                raise BendingError(f"BendingConfig: patterns must be strings, got {patterns!r}")
            self.items.append(ConfigItem(callback, tuple(patterns)))

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[ConfigItem]:
        return iter(self.items)

    def __add__(self, other: BendingConfig) -> BendingConfig:
        if not isinstance(other, BendingConfig):
            return NotImplemented
        added = BendingConfig(*self.items, *other.items)
        added.aliases = {**self.aliases, **other.aliases}
        return added

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BendingConfig):
            return NotImplemented
        return self.to_dict(keys=False) == other.to_dict(keys=False)

    def __repr__(self) -> str:
        lines = [f"  ({item.callback!r}, {', '.join(map(repr, item.patterns))})" for item in self]
        return "BendingConfig(\n" + ",\n".join(lines) + "\n)"

    def controls(self) -> list[BendingParameter]:
        found: list[BendingParameter] = []
        for item in self.items:
            for c in [*item.callback.controls(), *_option_controls(item.options)]:
                if all(c is not f for f in found):
                    found.append(c)
        return found

    # -- serialisation ---------------------------------------------------------------------------

    def to_dict(self, keys: bool = True) -> dict[str, Any]:
        """A JSON-able description of the configuration (tensor arguments as numbers)."""
        return self._described(keys, None)

    def _described(self, keys: bool, side: SideFile | None) -> dict[str, Any]:
        controls = self.controls()
        names = [c.name for c in controls]
        duplicated = {n for n in names if names.count(n) > 1}
        if duplicated:
            raise BendingError(f"several different controls are named {sorted(duplicated)}")
        return {
            "format": FORMAT,
            "version": VERSION,
            "controls": [_control_dict(c) for c in controls],
            **({"aliases": dict(self.aliases)} if self.aliases else {}),
            "bendings": [
                {
                    "callback": callback_dict(item.callback, side),
                    "patterns": list(item.patterns),
                    "fn": list(item.fn) if isinstance(item.fn, tuple) else item.fn,
                    **_options_dict(item.options, side),
                    **({"keys": list(item.keys)} if keys else {}),
                }
                for item in self.items
            ],
        }

    def save(self, path: str | Path) -> None:
        """Write the configuration to ``path`` as JSON; a tensor argument of more than
        :data:`~torchbend.config.tensors.INLINE_MAX` numbers goes to a safetensors file beside
        it, named after it (``bends.json``: ``bends.safetensors``), which the JSON names."""
        path = Path(path)
        side = SideFile(path)
        text = json.dumps(self._described(True, side), indent=2) + "\n"
        side.write()
        path.write_text(text)

    @classmethod
    def from_dict(
        cls,
        data: dict[str, Any],
        source: str = "the configuration",
        allow: Iterable[str] = (),
        folder: str | Path | None = None,
    ) -> BendingConfig:
        """The configuration ``data`` holds (what :meth:`to_dict` gives).

        ``data`` is checked against the configuration's JSON schema
        (:data:`torchbend.config.schema.SCHEMA`) before anything is built: what it refuses,
        and what the callbacks and controls refuse, raises a :class:`BendingError` that names
        ``source``, the entry and the field.

        Callback classes are found by name among torchbend's own and in modules already
        imported (your own, or files loaded with :func:`torchbend.load_callbacks`); a module
        that is not is imported only if ``allow`` names it: a configuration never makes
        torchbend import, and so run, code it names. Tensors kept in a side file are read
        from ``folder`` (:meth:`load` gives the file's); with ``None``, they are refused.
        """
        if isinstance(allow, str):
            raise BendingError(
                f"allow is a list of module names, not the string {allow!r}; write "
                f"allow=[{allow!r}]"
            )
        allowed = frozenset(allow)
        side = None if folder is None else Path(folder)
        check(data, source)
        controls = {}
        for i, c in enumerate(data.get("controls", [])):
            try:
                controls[c["name"]] = _control_from_dict(c)
            except BendingError as e:
                raise BendingError(f"{source}, control {i}: {e}") from None
        items = []
        for i, b in enumerate(data["bendings"]):
            where = f"{source}, bending {i}"
            callback = callback_from_dict(b["callback"], controls, where, allowed, side)
            fn = b.get("fn")
            items.append(
                ConfigItem(
                    callback,
                    tuple(b["patterns"]),
                    tuple(fn) if isinstance(fn, list) else fn,
                    list(b.get("keys", [])),
                    _options_from_dict(b, controls, where),
                )
            )
        config = cls(*items)
        config.aliases = dict(data.get("aliases", {}))
        return config

    @classmethod
    def load(cls, path: str | Path, allow: Iterable[str] = ()) -> BendingConfig:
        """Read a configuration written by :meth:`save` (``allow``: see :meth:`from_dict`)."""
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise BendingError(f"no bending configuration at {path}") from None
        except UnicodeDecodeError as e:
            raise BendingError(f"{path} is not valid JSON: it is not UTF-8 text ({e})") from None
        except OSError as e:
            raise BendingError(f"cannot read the bending configuration {path}: {e}") from None
        data = parse(text, str(path))
        return cls.from_dict(data, source=str(path), allow=allow, folder=path.parent)


def _control_dict(c: BendingParameter) -> dict[str, Any]:
    widget = c.widget_changes()  # only what differs from the widget derived from the control
    return {
        "name": c.name,
        "value": c.describe()["value"] if isinstance(c, TensorParameter) else c.get(),
        "range": None if c.range is None else list(c.range),
        "clamp": c.clamp,
        "ramp": c.ramp,
        **({"widget": widget} if widget else {}),
    }


def _control_from_dict(d: dict[str, Any]) -> BendingParameter:
    rng = d.get("range")
    widget = d.get("widget")
    if isinstance(d["value"], list):  # a tensor control: no range, clamp or ramp
        given = [k for k in ("range", "clamp", "ramp") if d.get(k)]
        if given:
            raise BendingError(
                f"control {d['name']!r} has a list as value (a tensor control), which takes no "
                f"{', '.join(given)}; leave them out"
            )
        return TensorParameter(
            d["name"], d["value"], widget=None if widget is None else Widget(**widget)
        )
    return BendingParameter(
        d["name"],
        d["value"],
        None if rng is None else (rng[0], rng[1]),
        d.get("clamp", False),
        int(d.get("ramp", 0)),  # the schema takes 2.0 for an integer
        widget=None if widget is None else Widget(**widget),
    )


def _option_controls(options: dict[str, Any]) -> list[BendingParameter]:
    """The controls a bending's options read (a live blend, a live subset's fraction)."""
    subset = options.get("subset")
    values: list[Any] = [options.get("blend"), None if subset is None else subset.fraction]
    return [control_of(v) for v in values if is_control(v)]


def _options_dict(options: dict[str, Any], side: SideFile | None) -> dict[str, Any]:
    """A bending's options as the file writes them, next to its callback."""
    written: dict[str, Any] = {}
    for key, value in options.items():
        if key == "blend":
            written[key] = encode(value, "blend", side)
        elif value is False:  # guard=False: not even the model's guard
            written[key] = False
        else:  # a Subset, a Window, a Guard
            fields = value.to_dict()
            if key == "subset":
                fields["fraction"] = encode(fields["fraction"], "subset.fraction", side)
            written[key] = fields
    return written


def _options_from_dict(
    b: dict[str, Any], controls: dict[str, BendingParameter], where: str
) -> dict[str, Any]:
    options: dict[str, Any] = {}
    try:
        if "blend" in b:
            options["blend"] = decode(b["blend"], controls, f"{where}, blend", frozenset())
        if "subset" in b:
            s = b["subset"]
            dim = s.get("dim")
            fraction = decode(s["fraction"], controls, f"{where}, subset", frozenset())
            options["subset"] = Subset(
                fraction, tuple(dim) if isinstance(dim, list) else dim, s.get("seed", 0)
            )
        if "window" in b:
            options["window"] = Window(**b["window"])
        if "guard" in b:
            options["guard"] = False if b["guard"] is False else Guard(**b["guard"])
    except BendingError as e:
        raise BendingError(f"{where}: {e}") from None
    return options
