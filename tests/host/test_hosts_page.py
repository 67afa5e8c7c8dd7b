"""docs/hosts.md's latency table is what ``torchbend check --latency`` prints for the README's
file today (benchmarks/bench_host.py writes it)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_latency_table_of_the_page_is_the_files(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(
            "bench_host", ROOT / "benchmarks/bench_host.py"
        )
        assert spec is not None and spec.loader is not None
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    lines = bench.latency_lines(bench.export(tmp_path))
    page = (ROOT / "docs" / "hosts.md").read_text()
    section = page[page.index("<!-- latency:") : page.index("<!-- /latency -->")]
    assert "\n".join(lines) in section, "run: python benchmarks/bench_host.py --write docs/hosts.md"
    assert "   2048   4032      0    256   4288" in section  # nn~'s 2N - 64, TinyDDSP's delay
