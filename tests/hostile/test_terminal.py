"""One way to show a string (issue 24, class 3): a name from a capture, a session or another machine
never reaches the terminal or a report raw. Control characters and bidi overrides are escaped on the
terminal and HTML is escaped in reports, through app/format.py printable; every command runs with its
stdout and stderr behind it (app/cli/common.py TerminalText), so a printer that forgets still cannot
forge a line."""
from __future__ import annotations

import io
import re
from functools import partial

import pytest

from app.cli.common import TerminalText
from app.format import BIDI_CONTROLS, printable, printable_lines
from tests.hostile.conftest import EVIL, run_cli, run_main

# What must never reach a terminal raw: C0 controls but newline and tab, DEL, C1, the line and
# paragraph separators, and the bidi overrides and isolates.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029" + BIDI_CONTROLS + "]")


def test_bidi_controls_are_the_ones_issue_24_names():
    assert BIDI_CONTROLS == "".join(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]))


@pytest.mark.parametrize("ch", [chr(c) for c in [*range(0, 32), 127, *range(0x80, 0xA0), 0x2028, 0x2029]]
                         + list(BIDI_CONTROLS))
def test_printable_escapes_each_control(ch):
    shown = printable(f"a{ch}b")
    assert not RAW.search(shown) and shown.startswith("a") and shown.endswith("b") and "\\" in shown
    assert not RAW.search(printable_lines(f"a{ch}b").replace("\n", "").replace("\t", ""))


def test_printable_for_html_escapes_markup_too():
    assert printable('<b a="1">&\u202e', html=True) == "&lt;b a=&quot;1&quot;&gt;&amp;\\u202e"
    assert printable("plain µ · text") == "plain µ · text"


def test_a_printer_that_forgets_is_caught_at_the_stream():
    """The stream cannot tell a newline inside a name from the printer's own, so only printable() at
    the printer stops a forged line; escapes, carriage returns and bidi controls stop here too."""
    out = io.StringIO()
    t = TerminalText(out)
    print(EVIL.replace("\n", "\r"), file=t)
    t.write("\rfleet: 3 of 9 hosts")
    text = out.getvalue()
    assert not RAW.search(text.replace("\n", "").replace("\rfleet", "fleet", 1))
    assert "\\x1b[31m" in text and "\\u202e" in text and "\\rFAKE" in text


COMMANDS = [("topology",), ("irqs",), ("threads",), ("plan", "--quiet", "1"), ("snapshot", "{tmp}/again.tar.gz"),
            ("report", "--out", "{tmp}/report.html")]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_printer_escapes_names_from_a_capture(hostile_names, tmp_path, command, capsys):
    args = [a.format(tmp=tmp_path) for a in command]
    # The first command as a child (what a terminal receives); the others in this process (run_main):
    # main() puts the same TerminalText on the streams, and their printers are what differ.
    run = run_cli if command == COMMANDS[0] else partial(run_main, capsys)
    r = run(*args, "--root", hostile_names, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    for text in (r.stdout, r.stderr):
        assert not RAW.search(text), (command, RAW.search(text), text[:2000])
        assert not any(line.startswith("FAKE") for line in text.splitlines())



def test_the_report_escapes_names_for_html(hostile_names, tmp_path, capsys):
    out = tmp_path / "report.html"
    r = run_main(capsys, "report", "--root", hostile_names, "--out", out, timeout=120)     # the file is checked
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert not RAW.search(html)
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
