"""The studio's bending of its model: a configuration as the page edits it (attach, move,
remove, reset, controls), with undo and redo, saved and loaded as the JSON Python reads.

The bending is kept by the :class:`~torchbend.BendedModule` itself: its configuration is what
the page is shown, and an undo step is that configuration as JSON, applied again from scratch.
"""

from __future__ import annotations

import json
import math
import threading
import warnings
from pathlib import Path
from typing import Any

from ..bended import BendedModule
from ..config import FORMAT, VERSION, BendingConfig
from ..errors import StudioError, TorchbendError, did_you_mean
from . import describe
from .replies import file_name

__all__ = ["HISTORY", "BendingEditor"]

HISTORY = 200
"""Undo steps kept."""


class BendingEditor:
    """What the page does to a model's bending; every change is checked, and a change that
    fails leaves the model bent as it was.

    Args:
        bended: the model.
        lock: held by every use of the model.
        folder: where configurations are saved (``NAME.json``).
    """

    def __init__(self, bended: BendedModule, lock: threading.RLock, folder: Path) -> None:
        self.bended = bended
        self.lock = lock
        self.folder = folder
        self.undo_stack: list[dict[str, Any]] = []
        self.redo_stack: list[dict[str, Any]] = []

    def state(self) -> dict[str, Any]:
        """What the page shows of the bending: the configuration (the JSON Python saves), its
        controls with their widgets, the targets each bending matched, undo and redo."""
        with self.lock:
            controls = self.bended.controllables
            return {
                "config": self._config(keys=True),
                # The page draws numbers: tensor controls are in the configuration only.
                "controls": [_control_json(c) for c in controls.values() if c.kind != "tensor"],
                "keys": [b.keys() for b in self.bended.bendings],
                "undo": len(self.undo_stack),
                "redo": len(self.redo_stack),
            }

    def set_config(self, data: Any) -> dict[str, Any]:
        """Bend the model with configuration ``data`` (replacing what it had): an undo step."""
        with self.lock:
            self._change(data)
            return self.state()

    def add(self, bending: Any) -> dict[str, Any]:
        """Append a bending: ``{"callback": {"class", "args"}, "patterns", "fn"?, "controls"?}``
        (an argument ``{"control": NAME}`` is driven by control NAME, which ``controls``
        declares as a configuration does)."""
        if not isinstance(bending, dict):
            raise StudioError(f"a bending is a JSON object, got {type(bending).__name__}")
        fields = ("callback", "patterns", "fn", "controls", "blend", "subset", "window", "guard")
        unknown = set(bending) - set(fields)
        if unknown:
            raise StudioError(
                f"a bending has no field {sorted(unknown)}; it takes {', '.join(fields)}"
            )
        with self.lock:
            data = self._config(keys=False)
            new_controls = bending.get("controls", [])
            if not isinstance(new_controls, list):
                raise StudioError("controls is a list of controls ({name, value, range})")
            taken = {c["name"] for c in data["controls"]}
            for c in new_controls:
                name = c.get("name") if isinstance(c, dict) else None
                if name in taken:
                    raise StudioError(
                        f"a control named {name!r} exists already; give the new one another name"
                    )
            data["controls"] = [*data["controls"], *new_controls]
            item = {k: v for k, v in bending.items() if k != "controls"}
            data["bendings"] = [*data["bendings"], item]
            self._change(data)
            return self.state()

    def remove(self, index: int) -> dict[str, Any]:
        with self.lock:
            data = self._config(keys=False)
            self._index(index, data)
            del data["bendings"][index]
            self._change(_drop_unused_controls(data))
            return self.state()

    def move(self, index: int, to: Any) -> dict[str, Any]:
        with self.lock:
            data = self._config(keys=False)
            self._index(index, data)
            if isinstance(to, bool) or not isinstance(to, int):
                raise StudioError(f"'to' is the new position, an int, got {to!r}")
            self._index(to, data)
            item = data["bendings"].pop(index)
            data["bendings"].insert(to, item)
            self._change(data)
            return self.state()

    def reset(self) -> dict[str, Any]:
        with self.lock:
            self._change({"controls": [], "bendings": []})
            return self.state()

    def undo(self) -> dict[str, Any]:
        return self._step(self.undo_stack, self.redo_stack, "undo")

    def redo(self) -> dict[str, Any]:
        return self._step(self.redo_stack, self.undo_stack, "redo")

    def _step(
        self, back: list[dict[str, Any]], forth: list[dict[str, Any]], what: str
    ) -> dict[str, Any]:
        """Bend the model as ``back``'s last configuration; the current one goes on ``forth``."""
        with self.lock:
            if not back:
                raise StudioError(f"nothing to {what}")
            now = self._config(keys=False)
            self._apply(back[-1], now)
            back.pop()
            forth.append(now)
            return self.state()

    def set_control(self, name: str, value: Any) -> dict[str, Any]:
        """Move control ``name``: live, no undo step (the saved configuration holds it)."""
        if not isinstance(value, (bool, int, float)):
            raise StudioError(f"control {name!r} takes a number or a bool, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise StudioError(f"control {name!r} takes a finite number, got {value!r}")
        with self.lock:
            controls = self.bended.controllables
            if name not in controls:
                raise StudioError(
                    f"no control {name!r}{did_you_mean(name, controls)}; the controls are "
                    f"{sorted(controls)}",
                    404,
                )
            try:
                self.bended.update(name, value)
            except TorchbendError as e:
                raise StudioError(str(e)) from None
            return {"name": name, "value": controls[name].get()}

    def saved(self) -> list[str]:
        folder = self.folder
        return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []

    def save(self, name: Any) -> dict[str, Any]:
        """Save the configuration as ``NAME.json`` in the folder, as Python saves it."""
        path = self._config_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unseeded callbacks: as in _config
            self.bended.bending_config().save(path)
        return {"name": name, "path": str(path)}

    def load_saved(self, name: Any) -> dict[str, Any]:
        path = self._config_path(name)
        if not path.is_file():
            raise StudioError(
                f"no saved configuration {name!r}{did_you_mean(str(name), self.saved())}; "
                f"saved: {self.saved()}",
                404,
            )
        data: dict[str, Any] = json.loads(path.read_text())
        return data

    def _config_path(self, name: Any) -> Path:
        return self.folder / f"{file_name(name, 'a configuration')}.json"

    def _config(self, keys: bool) -> dict[str, Any]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unseeded callbacks: the page shows their seed
            return self.bended.bending_config().to_dict(keys=keys)

    def _index(self, index: int, data: dict[str, Any]) -> None:
        count = len(data["bendings"])
        if not 0 <= index < count:
            raise StudioError(
                f"no bending {index}: there are {count} (0 to {count - 1})"
                if count
                else f"no bending {index}: nothing is bent",
                404,
            )

    def _change(self, data: Any) -> None:
        before = self._config(keys=False)
        self._apply(data, before)
        self.undo_stack.append(before)
        del self.undo_stack[:-HISTORY]
        self.redo_stack.clear()

    def _apply(self, data: Any, now: dict[str, Any]) -> None:
        """Bend the model with ``data`` from scratch; on failure, bend it back as ``now``
        (its configuration before, rebuilt: a reset detaches the callbacks it held)."""
        config = self._built(data)
        before = self._built(now)
        try:
            self._bend(config)
        except TorchbendError as e:
            self._bend(before)
            raise StudioError(str(e)) from None

    def _built(self, data: Any) -> BendingConfig:
        if not isinstance(data, dict):
            raise StudioError(
                f"a bending configuration is a JSON object, got {type(data).__name__}"
            )
        data = {"format": FORMAT, "version": VERSION, **data}
        for i, bending in enumerate(data.get("bendings") or []):
            callback = bending.get("callback") if isinstance(bending, dict) else None
            _check_classes(callback, f"bending {i}")
        try:
            return BendingConfig.from_dict(data, source="the configuration")
        except TorchbendError as e:
            raise StudioError(str(e)) from None

    def _bend(self, config: BendingConfig) -> None:
        self.bended.reset()
        self.bended.bend(config)


def _check_classes(callback: Any, where: str) -> None:
    """Refuse any callback class the page may not build, before anything is built."""
    if not isinstance(callback, dict):
        return  # the schema check names what is wrong
    name = callback.get("class")
    if not isinstance(name, str):
        return
    try:
        describe.form_callback(name)
    except StudioError as e:
        raise StudioError(f"{where}: {e}") from None
    args = callback.get("args")
    for value in args.values() if isinstance(args, dict) else ():
        if isinstance(value, dict) and "callback" in value:
            _check_classes(value["callback"], where)


def _drop_unused_controls(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the controls no bending reads any more."""
    read = _controls_read(data["bendings"])
    return {**data, "controls": [c for c in data["controls"] if c["name"] in read]}


def _controls_read(value: Any) -> set[str]:
    if isinstance(value, list):
        return set().union(*map(_controls_read, value)) if value else set()
    if isinstance(value, dict):
        own = {value["control"]} if isinstance(value.get("control"), str) else set()
        return own.union(*map(_controls_read, value.values())) if value else own
    return set()


def _control_json(control: Any) -> dict[str, Any]:
    widget = control.widget
    return {
        "name": control.name,
        "value": control.get(),
        "range": None if control.range is None else list(control.range),
        "clamp": control.clamp,
        "widget": widget.to_dict(),
    }
