"""`coremap irqs`: plain, --json, --file, --interval on the live machine and on a two-capture
snapshot; bad input exits 2 with a message naming the path."""
from __future__ import annotations

import json
import shutil
import time

import pytest

from app.cli.main import main
from tests.machines import INTERRUPTS_DIR, extract


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_from_a_file_exact_shape(capsys):
    path = INTERRUPTS_DIR / "node_exporter" / "interrupts_aarch64"
    code, out, err = _run(capsys, "irqs", "--file", str(path), "--json")
    assert code == 0 and err == ""
    d = json.loads(out)
    assert set(d) == {"schema_version", "cpus", "irqs"} and d["cpus"] == list(range(8))
    by = {r["irq"]: r for r in d["irqs"]}
    assert by["IPI0"]["counts"][0] == 2768808080 and by["IPI0"]["total"] == sum(by["IPI0"]["counts"])
    assert by["Err"]["counts"] == [] and by["Err"]["total"] == 0
    r10 = by["10"]
    assert (r10["chip"], r10["hwirq"], r10["name"]) == ("GICv3", "27", "arch_timer")
    assert {"irq", "counts", "total", "chip", "hwirq", "name"} <= set(r10)
    assert [r["irq"] for r in d["irqs"]][:3] == ["10", "14", "17"]


def test_json_from_a_root_has_affinity_and_device(capsys):
    code, out, _ = _run(capsys, "irqs", "--root", str(extract("master.internal")), "--json")
    assert code == 0
    d = json.loads(out)
    assert len(d["cpus"]) == 112
    by = {r["irq"]: r for r in d["irqs"]}
    assert by["599"]["requested"] == [88] and by["599"]["effective"] == [88] and by["599"]["node"] == 0
    assert by["599"]["device"]["netdev"] == "eno12399" and by["599"]["device"]["queue"] == "TxRx-0"
    assert by["ERR"]["counts"] == [] and "requested" not in by["ERR"]


def test_plain_table(capsys):
    code, out, _ = _run(capsys, "irqs", "--root", str(extract("worker1.internal")))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("561 interrupts, 80 CPUs")
    assert lines[1].split()[:3] == ["IRQ", "TOTAL", "TOP"]
    row = next(ln for ln in lines if ln.startswith("599 "))
    assert "i40e-ens7f1-TxRx-75" in row and " 5 " in row
    row10 = next(ln for ln in lines if ln.startswith("10 "))
    assert "48:285" in row10.split()


def test_live_plain_and_json(capsys):
    code, out, _ = _run(capsys, "irqs", "--json")
    assert code == 0 and json.loads(out)["irqs"]
    code, out, _ = _run(capsys, "irqs")
    assert code == 0 and "LOC" in out


def test_live_interval(capsys):
    code, out, _ = _run(capsys, "irqs", "--interval", "0.2")
    assert code == 0 and out.startswith("rates over 0.2") and "per CPU:" in out


def test_snapshot_with_second_capture(tmp_path, capsys):
    # A real two-capture snapshot of this machine's counters (the layout SysRoot.later() reads).
    root = tmp_path / "snap"
    t1 = root / ".coremap" / "t1"
    for d in (root / "proc", t1 / "proc"):
        d.mkdir(parents=True)
    for f in ("interrupts", "softirqs", "stat"):
        shutil.copyfile(f"/proc/{f}", root / "proc" / f)
    time.sleep(0.3)
    for f in ("interrupts", "softirqs", "stat"):
        shutil.copyfile(f"/proc/{f}", t1 / "proc" / f)
    (root / ".coremap" / "meta.json").write_text(json.dumps({"interval": 0.3}))
    code, out, err = _run(capsys, "irqs", "--root", str(root), "--interval", "1", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["seconds"] == 0.3 and d["irqs"]
    assert all(v >= 0 for r in d["irqs"] for v in r["per_cpu"])


@pytest.mark.parametrize("argv, needle", [
    (["--file", "/nonexistent/interrupts"], "/nonexistent/interrupts: no such file"),
    (["--root", "/nonexistent"], "/nonexistent: no such folder"),
    (["--file", str(INTERRUPTS_DIR / "node_exporter" / "interrupts"), "--interval", "1"], "rates need"),
])
def test_bad_input_exits_2(capsys, argv, needle):
    code, out, err = _run(capsys, "irqs", *argv)
    assert code == 2 and needle in err and "Traceback" not in err


def test_truncated_file_and_non_sysroot(tmp_path, capsys):
    text = (INTERRUPTS_DIR / "openshift-nto" / "sno-interrupts").read_text()
    bad = tmp_path / "interrupts"
    bad.write_text(text[:700])
    code, _, err = _run(capsys, "irqs", "--file", str(bad))
    assert code == 2 and err.startswith(f"coremap: {bad}, line ") and "counts where the header names 12" in err
    code, _, err = _run(capsys, "irqs", "--root", str(tmp_path))
    assert code == 2 and "is not a sysroot" in err


def test_fixture_root_without_second_capture(capsys):
    root = extract("sno")
    code, _, err = _run(capsys, "irqs", "--root", str(root), "--interval", "1")
    assert code == 2 and "rates need a live machine or a two-capture snapshot" in err and str(root) in err
    hw = extract("2pa-pcidomain32bits")
    code, _, err = _run(capsys, "irqs", "--root", str(hw))
    assert code == 2 and "proc/interrupts: missing" in err
