"""app/sources/export.py: the textfile for node_exporter, checked line by line, and the jitter results it
takes from `coremap probe jitter --json` (the real run is in tests/remote/test_sources.py)."""
from __future__ import annotations

import json
import re

import pytest

from app.sources.export import ExportError, Exported, gather, render, write
from app.sysroot import SysRoot
from probes.results import check_result
from tests.machines import extract

LINE = re.compile(r'^(# (HELP|TYPE) \S+ .+|# EOF|[a-z_]+(\{([a-z_]+="([^"\\\n]|\\.)*",?)*\})? [-+0-9.e]+)$')


def test_every_line_is_text_format_and_label_values_are_escaped():
    e = Exported(irqs=[("24", 'nic "eth0"\\q\nx', (0, 1, 2, 3), (2,)), ("25", "", None, None)], quiet=(3, 5),
                 pins=[("irq", "irq 24", "eth0-TxRx-0", (2,))], gaps={3: (12.5, 2e-6)})
    text = render(e, now=1795614393.917)
    lines = text.splitlines()
    assert all(LINE.match(x) for x in lines), [x for x in lines if not LINE.match(x)]
    assert lines[-1] == "# EOF"
    assert 'coremap_irq_affinity_info{irq="24",device="nic \\"eth0\\"\\\\q\\nx",requested="0-3",effective="2"} 1' in lines
    assert 'coremap_irq_affinity_info{irq="25",device="",requested="",effective=""} 1' in lines
    assert 'coremap_cpu_quiet{cpu="5"} 1' in lines
    assert 'coremap_jitter_gaps_per_second{cpu="3"} 12.5' in lines
    assert "coremap_export_timestamp_seconds 1795614393.917" in lines


def test_a_captured_machines_irqs_each_give_one_series(tmp_path):
    root = SysRoot(extract("sno"))
    e = gather(root)
    assert e.irqs and all(req is not None for _, _, req, _ in e.irqs)
    out = tmp_path / "coremap.prom"
    write(out, e)
    assert out.read_text().count("coremap_irq_affinity_info{") == len(e.irqs)


def test_jitter_results_give_gaps_per_second_and_anything_else_a_note(tmp_path):
    # "gaps" as a jitter run writes it (probes/result.py Gaps); the export reads its count and threshold
    gaps = {"from_ns": 1000, "count": 50, "max_ns": 9000, "lost_share": 0.001, "at_least": [],
            "percentiles": {"p50": 2000, "p90": 3000, "p99": 8000, "p99.9": 9000, "max": 9000}}
    good = {"probe": "jitter", "cpu": 2, "sampled_seconds": 0.5, "gaps": gaps}
    other = {"probe": "wakeup", "cpu": 1}
    path = tmp_path / "r.json"
    path.write_text(json.dumps([good, other, {"probe": "jitter", "cpu": 3, "gaps": {"count": -1}}]))
    e = gather(SysRoot(extract("sno")), results=[str(path)], check_result=check_result)
    assert e.gaps == {2: (100.0, 1e-6)}
    # two left out, and the one kept says no machine: included, with a note (tests/unit/test_result_host.py)
    assert len(e.notes) == 3 and sum("host unknown" in n for n in e.notes) == 1
    bad = tmp_path / "bad.json"
    bad.write_text("<html>")
    with pytest.raises(ExportError, match="not JSON"):
        gather(SysRoot(extract("sno")), results=[str(bad)], check_result=check_result)


def test_the_file_must_be_one_node_exporter_reads(tmp_path):
    with pytest.raises(ExportError, match=r"name a \.prom file"):
        write(tmp_path / "coremap.txt", Exported())
