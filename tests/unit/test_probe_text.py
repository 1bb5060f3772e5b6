"""The text `coremap probe` prints and the Summary tab shows (probes/text.py).

Oracles: app/format.py's format_ns for every figure; the header's CPU ids for the column a value
must end in.
"""
from __future__ import annotations

import re

from app.format import format_ns
from probes.text import format_attribution, format_result

C2C = {"probe": "c2c", "matrix_cpus": [0, 1, 12],
       "matrix_ns": [[None, 29.2, 1234.0], [29.2, None, 95.5], [1234.0, 95.5, None]]}


def test_c2c_matrix_keeps_every_value_whole_under_its_cpu():
    lines = format_result(C2C).splitlines()
    header, rows = lines[1], lines[2:]
    assert len(rows) == 3
    # the column where each CPU's id ends in the header: its values end there too
    ends = [m.end() for m in re.finditer(r"\d+", header)]
    assert header.split() == [str(c) for c in C2C["matrix_cpus"]]
    for cpu, row, values in zip(C2C["matrix_cpus"], rows, C2C["matrix_ns"]):
        assert row.split()[0] == str(cpu)
        for end, v in zip(ends, values):
            text = format_ns(v) if v is not None else "-"
            assert row[end - len(text):end] == text, (row, text)
            assert row[end - len(text) - 1] == " "
    # the first column's wide value, whole (it used to print as '9.2 ns')
    assert " 29.2 ns" in rows[1] and rows[1].split()[1:3] == ["29.2", "ns"]


def test_counters_table_spells_unavailable_counters():
    r = {"probe": "counters", "command": ["true"], "cpu": 1,
         "compare": {"cycles": {"pinned": None, "unpinned": None, "ratio": None},
                     "context-switches": {"pinned": 1234, "unpinned": 5, "ratio": 246.8}}}
    lines = format_result(r).splitlines()
    assert lines[0] == "counters for true (CPU 1):"
    assert lines[2].split() == ["cycles", "n/a", "n/a", "-"]
    assert lines[3].split() == ["context-switches", "1,234", "5", "246.80"]


def test_attribution_lines_say_why_there_is_none():
    assert format_attribution(None) == []
    assert format_attribution({"available": False, "reason": "needs root"}) == ["  gaps not attributed: needs root"]
