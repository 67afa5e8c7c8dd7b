"""Objects a method returns that torch.export cannot (an LLM's cache of keys and values), as
plain dicts of their fields holding tensors while exporting, rebuilt from the program's nodes.

torch.export takes outputs made of tensors in the containers its pytree registry knows. An
object of another class (transformers' ``DynamicCache``: a list of layer objects, each holding
a key and a value tensor) is packed into a dict under a key naming its place in a table; its
fields that hold no tensor (flags, a device) are kept in the table as they are. The rebuilt
graph then builds the object again, as the concrete tracer's graphs do, from those nodes and
constants.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..compat import pytree
from ..objects import holds_node, object_fields, rebuild_object

__all__ = ["Packer"]

_MARK = "torchbend packed object "


def _is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


class Packer:
    """Packs the objects of one export's output; unpacks them in its rebuilt graph."""

    def __init__(self) -> None:
        self.objects: list[tuple[type, list[Any] | None, dict[Any, Any], dict[str, Any]]] = []
        """Per packed object: its class, its item keys in order (``None`` for no mapping),
        and the items and attributes that hold no tensor, kept as they are."""
        self._seen: set[int] = set()

    def pack(self, value: Any) -> Any:
        """``value`` (an output) with each object holding tensors outside torch.export's
        registry replaced by a plain dict."""
        self._seen = set()
        return self._pack(value)

    def _pack(self, value: Any) -> Any:
        return pytree.tree_map(self._leaf, value)

    def _leaf(self, value: Any) -> Any:
        if isinstance(value, (torch.Tensor, nn.Module)) or id(value) in self._seen:
            return value
        fields = object_fields(value)
        if fields is None or not holds_node(fields, _is_tensor):
            return value
        self._seen.add(id(value))  # an object reached again (a cycle) is left to fail
        items, attributes = fields
        index = len(self.objects)
        kept_items = {k: v for k, v in (items or {}).items() if not holds_node(v, _is_tensor)}
        kept = {k: v for k, v in attributes.items() if not holds_node(v, _is_tensor)}
        self.objects.append((type(value), None if items is None else list(items), kept_items, kept))
        packed = {
            "items": {k: self._pack(v) for k, v in (items or {}).items() if k not in kept_items},
            "attributes": {k: self._pack(v) for k, v in attributes.items() if k not in kept},
        }
        return {f"{_MARK}{index}": packed}

    def unpacked(self, value: dict[Any, Any]) -> Any:
        """The object a dict of the program's output stands for (its fields holding graph
        nodes, packed ones among them), or ``None`` for a dict that stands for none."""
        key = next(iter(value), None) if len(value) == 1 else None
        if not (isinstance(key, str) and key.startswith(_MARK)):
            return None
        cls, order, kept_items, kept = self.objects[int(key.removeprefix(_MARK))]
        packed = value[key]
        found = {**kept_items, **packed["items"]}
        items = None if order is None else {k: found[k] for k in order}
        return rebuild_object(cls, items, {**kept, **packed["attributes"]})
