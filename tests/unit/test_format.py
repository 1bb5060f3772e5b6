"""app/format.py: every number, time, size and CPU-list spelling, tested once."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.errors import excerpt
from app.format import (UNKNOWN, cpus_word, format_change, format_compact, format_count, format_cpus,
                        format_ns, format_percent, format_rate, format_ratio, format_share, format_shares, format_size,
                        offline_sentence, plural, printable, shares_of, unknown_cpus_sentence)


@pytest.mark.parametrize("ns, text", [
    (0, "0 ns"), (8.74, "8.74 ns"), (29.2, "29.2 ns"), (999, "999 ns"), (999.6, "1 µs"),
    (1500, "1.5 µs"), (25_000, "25 µs"), (2_500_000, "2.5 ms"), (12_345_678, "12.3 ms"),
    (2e9, "2 s"), (None, UNKNOWN), (math.nan, UNKNOWN), (math.inf, UNKNOWN)])
def test_ns(ns, text):
    assert format_ns(ns) == text


@pytest.mark.parametrize("v, text", [
    (0, "0"), (7, "7"), (3.5, "3.5"), (12, "12"), (999, "999"), (999.7, "1k"), (1000, "1k"),
    (1234, "1.2k"), (35_000, "35k"), (1e6, "1M"), (2.5e9, "2.5G"), (-1234, "-1.2k"), (None, UNKNOWN)])
def test_compact(v, text):
    assert format_compact(v) == text


def test_rates_counts_percentages_sizes():
    assert [format_rate(v) for v in (None, 0, 0.44, 3.5, 12_345.4)] == ["", "0/s", "0.4/s", "3.5/s", "12,345/s"]
    assert format_count(1_234_567) == "1,234,567" and format_count(None) == ""
    assert [format_percent(v) for v in (None, 0, 3.46, 9.96, 37.5, 200)] == ["", "0%", "3.5%", "10%", "38%", "200%"]
    assert [format_size(v) for v in (None, 512, 48 << 10, int(27.5 * (1 << 20)), 1 << 30)] == \
        ["?", "512 B", "48 KiB", "27.5 MiB", "1 GiB"]


def test_cpu_lists_and_changes():
    assert format_cpus(None) == "" and format_cpus(()) == "none" and format_cpus([3, 0, 1, 2, 8]) == "0-3,8"
    assert format_change((0, 1, 2, 3), (2,)) == "0-3 -> 2"
    assert format_change(None, ()) == "? -> none"


def test_one_plural_rule_for_every_count():
    # issue 23: "1 threads", "CPUs 1", "1 probe runs" came from counts spelt by hand in each place.
    assert [plural(n, "thread") for n in (0, 1, 2, 1234)] == ["0 threads", "1 thread", "2 threads", "1,234 threads"]
    assert plural(1, "process", "processes") == "1 process" and plural(3, "process", "processes") == "3 processes"
    assert plural(1, "probe run") == "1 probe run"
    assert cpus_word([1]) == "CPU 1" and cpus_word({3, 2}) == "CPUs 2-3" and cpus_word([1, 1]) == "CPU 1"


def test_sentences_name_the_cpus_and_the_choice():
    assert offline_sentence([12], range(12)) == "CPU 12 is offline; choose among the online CPUs 0-11"
    assert offline_sentence([2, 3], [0, 1]) == "CPUs 2-3 are offline; choose among the online CPUs 0-1"
    assert unknown_cpus_sentence([999], [0, 1]) == "CPU 999 does not exist on this machine; it has CPUs 0-1"


def test_shares():
    s = shares_of([(3, 61.0), (7, 39.0)])
    assert format_shares(s) == "3: 61% · 7: 39%"
    assert format_shares(shares_of([(c, 1) for c in range(5)]), top=2) == "0: 20% · 1: 20% · +3 CPUs"
    assert shares_of([]) == []


def test_untrusted_text_is_escaped_and_cut():
    assert printable("java") == "java"
    assert printable("evil\x1b[31mred\nline") == "evil\\x1b[31mred\\nline"
    assert excerpt("x" * 100, 10) == repr("x" * 10) + "…"
    assert "\x1b" not in excerpt("\x1b]0;title\x07")


@given(st.floats(allow_nan=True, allow_infinity=True) | st.none())
def test_never_raises(v):
    for f in (format_ns, format_compact):
        assert isinstance(f(v), str)


@pytest.mark.parametrize("r, text", [(0.4213, "0.42×"), (1.0, "1.00×"), (12.34, "12.3×"), (None, UNKNOWN),
                                     (float("nan"), UNKNOWN)])
def test_ratio(r, text):
    assert format_ratio(r) == text


def test_share_of_time_is_a_percentage():
    assert (format_share(0.00685), format_share(0.35), format_share(0), format_share(None)) == ("0.7%", "35%", "0%", "")


def test_command_name_is_the_runtime_and_what_it_runs():
    from app.format import command_name
    assert command_name("python3", "/usr/bin/python3 -u /opt/svc/serve.py --port 8") == "python3 serve.py"
    assert command_name("python3", "python3 -m http.server 8000") == "python3 -m http.server"
    assert command_name("python3", "python3 -c import time") == "python3 -c"
    assert command_name("node", "node") == "node"
    assert command_name("kworker/0:1", "") == "kworker/0:1"
    assert len(command_name("python3", "python3 " + "x" * 200)) <= 48
    # A script run by its shebang carries its own name as comm: once, whole where the kernel cut it.
    assert command_name("coremap", "/opt/venv/bin/python /opt/venv/bin/coremap --size 800x600") == "coremap"
    assert command_name("prometheus-node", "/usr/bin/python3 /usr/local/bin/prometheus-node-exporter") == \
        "prometheus-node-exporter"


def test_probe_exit_sentence_names_the_status_and_the_last_stderr_lines():
    from app.format import probe_exit_sentence
    assert probe_exit_sentence("jitter CPU 1", 0, ["x"]) is None
    assert probe_exit_sentence("jitter CPU 1", None, []) is None
    assert probe_exit_sentence("jitter CPU 1", -9, []) == "jitter CPU 1: the probe exited with status -9"
    assert (probe_exit_sentence("jitter CPU 1", 3, ["a", "b", "c", "d"])
            == "jitter CPU 1: the probe exited with status 3: b; c; d")


def test_a_probe_child_that_dies_without_an_error_line_says_so():
    import sys

    from probes.runner import ProbeRun
    code = "import sys; print('{\"type\": \"hello\"}', flush=True); sys.stderr.write('oops\\n'); sys.exit(5)"
    run = ProbeRun([sys.executable, "-c", code])
    assert run.wait(30) == 5
    assert run.failure("jitter CPU 1") == "jitter CPU 1: the probe exited with status 5: oops"
