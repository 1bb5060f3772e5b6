"""app/store/report.py on real machines: figures match /proc/interrupts read independently; the HTML is one
self-contained file with everything from the machine escaped; one capture says totals, not rates."""
import re
from html.parser import HTMLParser

import pytest

from app.store.report import Image, build_report_html, report_from_root, report_from_session
from app.store.session import Session, history_tick, open_session, save_session
from app.sysroot import SysRoot
from tests.machines import copy_machine, extract


@pytest.fixture(scope="module")
def master():
    root = SysRoot(extract("master.internal"))
    return root, report_from_root(root)


def _irq_totals_from_text(text: str) -> dict[str, int]:
    """Oracle: per-IRQ totals of numbered rows, by a plain split (no coremap parser)."""
    lines = text.splitlines()
    ncpu = len(lines[0].split())
    out = {}
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        label = label.strip()
        if not label.isdigit():
            continue
        out[label] = sum(int(x) for x in rest.split()[:ncpu])
    return out


def test_master_figures_match_proc_interrupts(master):
    root, r = master
    oracle = _irq_totals_from_text((root.root / "proc" / "interrupts").read_text())
    assert r.totals and "totals, not rates" in r.rate_note
    assert r.cpu_count == 112
    busiest = sorted(oracle.items(), key=lambda kv: (-kv[1], int(kv[0])))[:len(r.irqs)]
    assert [(l.irq, int(l.rate)) for l in r.irqs] == [(k, v) for k, v in busiest]
    top = r.irqs[0]
    # requested/effective come from proc/irq/N/*_list
    assert top.requested == tuple(int(x) for x in (root.root / "proc/irq" / top.irq / "smp_affinity_list").read_text().split(","))
    assert abs(sum(s for _, s in top.top_cpus) - 1.0) < 0.01 or len(top.top_cpus) == 3


def test_master_summary(master):
    _, r = master
    facts = dict(r.facts)
    assert facts["Model"] == "Intel(R) Xeon(R) Gold 6330 CPU @ 2.00GHz"
    assert facts["Shape"].startswith("2 sockets × 28 cores × 2 threads = 112 CPUs")
    assert facts["NUMA nodes"].startswith("node 0: CPUs 0,2,4")
    assert "5.14.0-427.59.1.el9_4.x86_64 (from BOOT_IMAGE" in facts["Kernel"]
    assert facts["irqbalance"].startswith("unknown")


def test_isolated_machine_summary():
    r = report_from_root(SysRoot(extract("worker1.internal")))
    facts = dict(r.facts)
    assert facts["isolcpus"].startswith("0-4,11-79")
    assert facts["nohz_full"] == "0-4,11-79"


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.srcs, self.hrefs, self.text = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if "src" in a:
            self.srcs.append(a["src"])
        if "href" in a:
            self.hrefs.append(a["href"])

    def handle_data(self, data):
        self.text.append(data)


def test_html_is_self_contained_and_escaped(tmp_path):
    src = extract("sno")
    copy = tmp_path / "evil"
    copy_machine(src, copy)
    evil = 'quiet <script>alert("x")</script> isolcpus=2-3 & <img src=http://evil/x.png>'
    (copy / "proc" / "cmdline").write_text(evil + "\n")
    r = report_from_root(SysRoot(copy), notes="<b>bold?</b> & notes",
                         probes=[{"probe": "jitter", "cpu": 1, "percentiles":
                                  {"p50": 900, "p90": 1500, "p99": 25000, "p99.9": 2_500_000, "max": 3_000_000}}])
    r.topology_image = Image(b"\x89PNG\r\n\x1a\nfake-bytes", "image/png", 10, 10)
    html = build_report_html(r)
    assert "<script" not in html and "<img src=http" not in html
    p = _Collect()
    p.feed(html)
    assert "script" not in p.tags and "link" not in p.tags
    assert p.hrefs == []
    assert p.srcs and all(s.startswith("data:image/") for s in p.srcs)
    text = "".join(p.text)
    assert evil in text                  # shown to the reader, as text
    assert "<b>bold?</b> & notes" in text
    assert not re.search(r"<img[^>]+http", html)
    # the percentile table, in readable units
    assert "2.5 ms" in text and "25 µs" in text and "900 ns" in text


def test_report_from_session_uses_recorded_rates(tmp_path):
    root = SysRoot(extract("sno"))
    hist = [history_tick(t, {0: {"irq": 10.0}}, {"24": {1: 300.0 + 100 * t}, "25": {0: 5.0}}) for t in range(3)]
    p = tmp_path / "s.coremap"
    save_session(p, Session(machine_dir=root.root, history=hist, notes="seen",
                            journal=[{"kind": "irq", "target_id": 24, "before": [0, 1], "requested": [1],
                                      "after": [1], "state": "done", "time": 1.0}]))
    o = open_session(p)
    try:
        r = report_from_session(o)
    finally:
        o.close()
    assert not r.totals and "3 sampled ticks" in r.rate_note
    assert [(l.irq, l.rate) for l in r.irqs] == [("24", 400.0), ("25", 5.0)]
    assert r.irqs[0].top_cpus == ((1, 1.0),)
    assert [(pn.target, pn.before, pn.after, pn.result) for pn in r.pins] == [("IRQ 24", (0, 1), (1,), "done")]
    assert r.notes == "seen"
    html = build_report_html(r)
    assert "400/s" in html and "0-1 -&gt; 1" in html


def test_report_shows_what_ran_in_the_gaps_of_an_attributed_run():
    from probes import trace as T
    from tests.machines import FIXTURES
    text = (FIXTURES / "tracefs" / "kvm-6.18-cpu1.trace").read_text()
    stats = T.parse_stats((FIXTURES / "tracefs" / "kvm-6.18-cpu1.stats").read_text())
    events = T.parse_trace(text)
    timer = next(e.ts_ns for e in events if e.event == "local_timer_entry")
    quiet = events[-1].ts_ns + 50_000
    a = T.attribute_run(text, stats, [(timer, 5_000), (quiet, 20_000)], probe_pid=-1,
                        started_ns=events[0].ts_ns, t0_ns=events[0].ts_ns)
    a.pop("type")
    r = report_from_root(SysRoot(extract("sno")),
                         probes=[{"probe": "jitter", "cpu": 1, "percentiles": {}, "attribution": a},
                                 {"probe": "jitter", "cpu": 2, "percentiles": {},
                                  "attribution": {"available": False, "reason": "needs <root>"}}])
    p = _Collect()
    p.feed(build_report_html(r))
    body = "".join(p.text)
    assert "What ran in the 2 largest gaps" in body
    assert "local timer" in body and "hardware / hypervisor" in body and "20 µs" in body
    assert "Gaps not attributed: needs <root>" in body


# -- issue 23: batch rows, exited targets, the source and irqbalance a window saw -----------------------

def _isolate_rows(origin="isolate", batch=7):
    """A Make quiet of CPU 1 with 6 targets: 3 moved off it, 1 already off it, 1 exited, 1 denied."""
    def row(i, kind, before, after, state="done", code="ok", message=""):
        return {"id": batch + i, "batch": batch, "origin": origin, "kind": kind, "target_id": 100 + i, "label": "",
                "before": before, "requested": [0, 2, 3], "after": after, "state": state, "code": code,
                "message": message, "time": 1.7e9}
    return [row(0, "thread", [0, 1, 2, 3], [0, 2, 3]), row(1, "irq", [1], [0, 2, 3]),
            row(2, "irqdefault", [0, 1, 2, 3], [0, 2, 3]), row(3, "thread", [2], [2]),
            row(4, "thread", [1], None, "failed", "gone", "thread 104 has exited"),
            row(5, "thread", [1], None, "failed", "denied", "thread 105 belongs to another user")]


def test_a_make_quiet_batch_reads_as_what_it_did():
    r = report_from_root(SysRoot(extract("sno")), journal=_isolate_rows(), live_wait=0)
    (line,) = r.pins
    assert line.target == "Make quiet CPU 1 (#7)"
    assert line.change == "6 targets: 3 moved, 1 already off them, 1 denied, 1 gone (exited)"
    assert line.requested == (0, 2, 3) and line.result == "1 failed"
    html = build_report_html(r)
    assert "? -&gt; ?" not in html and "Make quiet CPU 1 (#7)" in html and "3 moved" in html
    give_back = report_from_root(SysRoot(extract("sno")), live_wait=0, journal=[
        dict(e, origin="include", before=e["after"], after=e["before"], state="done", code="ok")
        for e in _isolate_rows("include", 9)[:3]]).pins[0]
    assert give_back.target == "Give back CPU 1 (#9)" and give_back.change == "3 targets: 3 given back"
    assert give_back.result == "done"


def test_an_exited_target_is_gone_not_failed():
    r = report_from_root(SysRoot(extract("sno")), live_wait=0, journal=[
        {"kind": "thread", "target_id": 4243, "label": "worker", "before": [1], "requested": [0, 1], "after": None,
         "state": "failed", "code": "gone", "message": "thread 4243 has exited", "time": 1.7e9}])
    assert r.pins[0].result == "gone: thread 4243 has exited"
    assert "failed" not in build_report_html(r).split("Pins made")[1]


def test_every_kind_of_pin_reads_as_its_value_means():
    """A cpuset move, a sysctl and a cpuset's CPUs are not CPU lists (app/pinning/kinds.py): the report
    words them as `coremap journal` does (a thread's cpuset move read "1 -> 2")."""
    def row(kind, target, before, requested, label=""):
        return {"kind": kind, "target_id": target, "label": label, "before": before, "requested": requested,
                "after": requested, "state": "done", "code": "ok", "time": 1.7e9, "origin": "cli"}
    r = report_from_root(SysRoot(extract("sno")), live_wait=0, journal=[
        row("cgroupthread", 4243, [1], [2], "market-data-feed-handler-0"), row("sysctl", 1, [1], [0]),
        row("cpuset", 2, [], [0, 1])])
    cells = [re.sub(r"<[^>]+>", "|", m) for m in re.findall(r"<tr><td>.*?</tr>", build_report_html(r).split("Pins made")[1])]
    assert "thread 4243 (market-data-feed-handler-0) cpuset||/coremap-system -&gt; /coremap-pinned||/coremap-pinned|" \
        in cells[0], cells[0]
    assert "|1 -&gt; 0||0|" in cells[1] and "|absent -&gt; 0-1||0-1|" in cells[2], cells


def test_the_source_and_irqbalance_the_window_saw_win_over_the_snapshot():
    root = SysRoot(extract("sno"))
    plain = report_from_root(root, live_wait=0)
    assert dict(plain.facts)["irqbalance"].startswith("unknown") and plain.source == str(root.root)
    r = report_from_root(root, live_wait=0, source="node7 (live)", irqbalance="not running")
    assert r.source == "node7 (live)" and dict(r.facts)["irqbalance"] == "not running"
    assert "node7 (live)" in build_report_html(r)


def test_rows_ask_not_to_be_split_across_pages():
    assert re.search(r"tr\s*\{\s*page-break-inside:\s*avoid;", build_report_html(report_from_root(
        SysRoot(extract("sno")), live_wait=0)))
