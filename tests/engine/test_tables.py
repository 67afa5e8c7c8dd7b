"""Tables: text for terminals, HTML for notebooks."""

from __future__ import annotations

from torchbend.engine.tables import Table, show


def test_table_is_a_string_with_html(tmp_path, capsys):
    table = Table([["a", 1], ["b", 2]], ["name", "value"])
    assert isinstance(table, str) and "name" in table and "b" in table
    assert table._repr_html_().startswith("<table>")
    assert show(table, None) is table
    assert "value" in capsys.readouterr().out
    show(table, tmp_path / "t.txt")
    assert (tmp_path / "t.txt").read_text() == table + "\n"
    assert capsys.readouterr().out == ""
