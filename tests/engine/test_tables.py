"""Tables: text for terminals, HTML for notebooks; the names of a model's latent channels."""

from __future__ import annotations

import torch
from torch import nn

import torchbend as tb
from torchbend.engine.tables import Table, latent_names, show


def test_table_is_a_string_with_html(tmp_path, capsys):
    table = Table([["a", 1], ["b", 2]], ["name", "value"])
    assert isinstance(table, str) and "name" in table and "b" in table
    assert table._repr_html_().startswith("<table>")
    assert show(table, None) is table
    assert "value" in capsys.readouterr().out
    show(table, tmp_path / "t.txt")
    assert (tmp_path / "t.txt").read_text() == table + "\n"
    assert capsys.readouterr().out == ""


class Named(nn.Module):
    """A model whose three-channel latent names its channels."""

    def __init__(self, names: object = ("pitch", "loudness", "timbre")) -> None:
        super().__init__()
        self.encoder = nn.Conv1d(1, 3, 1)
        self.decoder = nn.Conv1d(3, 1, 1)
        self.latent_names = names

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


def table_of(model: nn.Module) -> list[list[str]]:
    bended = tb.BendedModule(model)
    bended.trace(x=torch.randn(1, 1, 8))
    table = bended.print_activations(out=None)
    return [list(map(str, row)) for row in [table.headers, *table.rows]]


def test_the_activation_table_names_the_channels_of_a_latent_that_has_names(capsys):
    rows = table_of(Named())
    assert rows[0][-1] == "latent channels"
    named = {row[0]: row[-1] for row in rows[1:]}
    assert named == {"x": "", "encoder": "pitch, loudness, timbre", "decoder": ""}
    assert "pitch, loudness, timbre" in capsys.readouterr().out


def test_a_model_without_names_or_with_other_than_strings_gets_no_column():
    for names in (None, "pitch", [1, 2, 3], []):
        assert latent_names(Named(names)) is None
        assert table_of(Named(names))[0] == ["name", "op", "shape", "dtype"]
    assert latent_names(tb.models.TinyDDSP())[:4] == [
        "pitch",
        "loudness",
        "brightness",
        "noisiness",
    ]
