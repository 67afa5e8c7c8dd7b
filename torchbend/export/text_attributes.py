"""nn~ attributes set by text: bool controls and menus, read from what a Pd or Max patch sends.

nn~ turns the numbers of ``[set NAME value(`` into text (``std::to_string``: ``"0.000000"``) and
parses it by the attribute's type code; its bool parser reads every number as true and its int
parser reads no name. Bool controls and menus are therefore declared as text (str) attributes,
whose setters read the text with :func:`~torchbend.controls.rules.bool_from_text` and
:func:`~torchbend.controls.rules.choice_from_text` (docs/export.md, "Setting controls from a
patch").
"""

from __future__ import annotations

from ..controls import BendingParameter

__all__ = ["attribute_type", "from_text_source", "text_getter_value"]


def attribute_type(control: BendingParameter) -> str:
    """The type nn~ is told a control's attribute has (a key of
    :data:`~torchbend.export.nntilde.TYPE_HASH`): ``"str"`` for a bool control and a menu (an
    int control with ``widget.choices``), whose setters read the text a patch sends (nn~ would
    read any number as true for a bool, and no entry's name for an int); else the control's
    kind; ``"buffer"`` for a tensor control (a Pd array or a Max ``buffer~``,
    :mod:`~torchbend.export.tensor_attributes`)."""
    if control.kind == "tensor":
        return "buffer"
    if control.kind == "bool" or (control.kind == "int" and control.widget.choices):
        return "str"
    return control.kind


def from_text_source(control: BendingParameter) -> list[str]:
    """TorchScript lines opening the ``set_`` of an attribute nn~ passes as text
    (:func:`attribute_type`): they define ``value``, the control's value read from the text
    ``given`` (returning -1 for text it does not read), or ``given`` itself from Python."""
    if control.kind == "bool":
        read = ["    flag = rules.bool_from_text(given)", "    value = flag == 1"]
    else:
        choices = list(control.widget.choices)
        read = [f"    value = rules.choice_from_text(given, {choices!r})", "    flag = value"]
    return [
        "    if isinstance(given, str):",
        *["    " + line for line in read],
        "        if flag < 0:",
        "            return -1",
        "    else:",
        "        value = given",
    ]


def text_getter_value(name: str, control: BendingParameter) -> str:
    """TorchScript of the value of a control nn~ reads as text, as text: ``"true"`` or
    ``"false"``, or the name of the menu's entry."""
    if control.kind == "bool":
        return f'("true" if self.tb_control_{name} else "false")'
    return f"{list(control.widget.choices)!r}[self.tb_control_{name}]"
