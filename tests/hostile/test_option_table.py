"""Every option and every file the CLI accepts, in one table with its kind, and each kind's hostile cases
(issue 32, "Extend the hostile tests"). A new option fails test_every_option_has_a_kind until it is given
one here; a kind without cases, or a file option without a command that reaches its reader, fails too.

Values are checked where they are read: the option's own argparse type (numbers, URLs, sizes), or the one
parser of its kind (CPU lists, hosts, times); files by running the command on a FIFO with no writer, a
link to /dev/zero and a 2 GB sparse file (inputs), or a link, a device and a FIFO (outputs). Each is
refused with one line (never a traceback) well within 20 s, and an output's target is left as it was."""
from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli.main import build_parser
from app.errors import CoremapError
from app.inputs import STREAM_IDLE_ENV
from tests.hostile.conftest import REPO, run_main

# -- the table: every option (by its long name; a positional by "command:dest") and its kind -------------
TABLE = {
    "--attribute": "flag", "--csv": "flag", "--dry-run": "flag", "--help": "flag", "--install-desktop": "flag",
    "--json": "flag", "--keep-pins": "flag", "--man": "flag", "--move-pinned": "flag", "--no-dma-latency": "flag",
    "--no-second": "flag", "--pm-qos": "flag", "--pretty": "flag", "--reapply": "flag", "--unbound": "flag",
    "--version": "flag",
    "--any-host": "flag",                                   # report, export: another machine's results (issue 30)
    "--no-threads": "flag", "diff:a": "input", "diff:b": "input",                  # snapshot, diff (issue 30)
    "--replace": "flag", "--intel-pstate-disable": "flag",
    "--spread": "flag", "--rps": "flag", "--irq": "text", "--device": "text",      # pin's IRQ selection (issue 30)
    "--hung-task": "flag", "--no-numa-balancing": "flag", "--no-ksm": "flag", "--performance": "flag",  # isolate's
    "--force-latency": "flag", "--no-rt-throttling": "flag",                          # tuned knobs (issue 30)
    "--kind": "choice",                                                                 # threads' kinds (issue 30)
    "--completion": "choice", "--like": "choice", "--sort": "choice", "--thp": "choice", "--transport": "choice",
    "--what": "choice", "--work": "choice",
    "--duty": "number", "--every": "number", "--interval": "number", "--interval-us": "number",
    "--jitter-cpu": "number", "--jitter-seconds": "number", "--node": "number", "--parallel": "number",
    "--pid": "number", "--priority": "number", "--rounds": "number", "--seconds": "number", "--slack-ns": "number",
    "--threads": "number", "--threshold-ns": "number", "--ticks": "number", "--tid": "number", "--timeout": "number",
    "--pcp": "url", "--prometheus": "url",
    "--at": "time", "--since": "time",
    "--cpu": "cpulist", "--quiet": "cpulist",
    "--host": "host", "fleet:hosts": "host",
    "--size": "size", "--color-by": "text", "--java": "text", "--match": "text", "--name": "text",
    "--service": "text", "--rates": "text", "--pairs": "text", "--placement": "text", "--policy": "text",
    "probe counters:command_words": "command", "probe first-touch:command_words": "command",
    "probe scaling:command_words": "command",
    "--root": "folder", "--captures": "folder",
    "--file": "input", "--jitter": "input", "--notes": "input", "--probe": "input", "--session": "input",
    "--source-config": "input", "--verify": "input", "--pcp-archive": "input",
    "--out": "output", "--screenshot": "output", "--textfile": "output", "--hlog": "output", "snapshot:out": "output",
}

# -- each kind's hostile cases -------------------------------------------------------------------------------
CASES = {
    "choice": ["nope", "\x1b[31mred", ""],
    "number": ["nan", "inf", "-inf", "1e999", "9" * 400, "-1", "\u0663", "0x10", "", "1_000", " 1e308 "],
    "url": ["http://127.0.0.1:99999/", "http://[::1", "http://127.0.0.1:abc/", "http://e\x1b[31mvil/",
            "http://" + "a" * 64 + ".example/", "http://u:pw@h/", "ftp://h/"],
    "time": ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-12:00", "noon", "9" * 400, "1e308", "\x1b[2J"],
    "cpulist": ["\u0661", "0-99999999", "-1", "1,,", "9" * 400, "0-65535:0/0"],
    "host": ["", "-oProxyCommand=touch x", "h\x1b[31m", "a" * 300, "[::1", "user@"],
    "size": ["0x0", "99999999x1", "nanxinf", "1e999x1", "\u0661x1"],
    "text": ["\x1b]0;pwned\x07", "\u202egnp", "x" * 100_000, "a\nb"],
    "command": ["-Dall", "\x1b[31m", ""],
    "folder": ["fifo", "zero", "file"],
    "input": ["fifo", "zero", "sparse"],
    "output": ["link", "device", "fifo"],
}

# Where a kind is read by one parser of its own (not an argparse type): that parser.


def _parse_time(text):
    from app.sources.replay import Timeline, parse_at

    class Wall(Timeline):
        wall, times = True, [1795614000.0, 1795614060.0]
    return parse_at(text, Wall())


def _parse_cpulist(text):
    from app.parse.cpulist import parse_cpulist
    return parse_cpulist(text)


def _parse_host(text):
    from app.remote.hosts import parse_host
    return parse_host(text)


KIND_PARSERS = {"time": _parse_time, "cpulist": _parse_cpulist, "host": _parse_host}

# A command line that reaches each file option's reader or writer ({v}: the hostile path).
REACH = {
    ("", "--session"): ["--session", "{v}", "--screenshot", "{tmp}/x.png"],
    ("", "--pcp-archive"): ["--pcp-archive", "{v}", "--at", "end", "--screenshot", "{tmp}/x.png"],
    ("", "--source-config"): ["--prometheus", "http://127.0.0.1:1", "--host", "a", "--source-config", "{v}"],
    ("", "--captures"): ["--prometheus", "http://127.0.0.1:1", "--host", "a", "--captures", "{v}"],
    ("", "--root"): ["topology", "--root", "{v}"],
    ("", "--screenshot"): ["--root", "{sno}", "--screenshot", "{v}"],
    ("diff", "diff:a"): ["diff", "{v}", "{sno}"],
    ("diff", "diff:b"): ["diff", "{sno}", "{v}"],
    ("export", "--jitter"): ["export", "--textfile", "{tmp}/x.prom", "--jitter", "{v}"],
    ("export", "--textfile"): ["export", "--textfile", "{v}"],
    ("fleet", "--file"): ["fleet", "--json", "--file", "{v}"],
    ("fleet", "--source-config"): ["fleet", "--json", "--prometheus", "http://127.0.0.1:1", "--source-config", "{v}"],
    ("fleet", "--captures"): ["fleet", "--json", "--prometheus", "http://127.0.0.1:1", "--captures", "{v}"],
    ("fleet", "--screenshot"): ["fleet", "--prometheus", "http://127.0.0.1:1", "--screenshot", "{v}"],
    ("irqs", "--file"): ["irqs", "--file", "{v}"],
    ("plan", "--out"): ["plan", "--root", "{sno}", "--quiet", "1", "--out", "{v}"],
    ("probe jitter", "--hlog"): ["probe", "jitter", "--seconds", "0.1", "--hlog", "{v}"],
    ("probe wakeup", "--hlog"): ["probe", "wakeup", "--seconds", "0.1", "--hlog", "{v}"],
    ("report", "--session"): ["report", "--session", "{v}", "--out", "{tmp}/r.html"],
    ("report", "--out"): ["report", "--root", "{sno}", "--out", "{v}"],
    ("report", "--probe"): ["report", "--root", "{sno}", "--probe", "{v}", "--out", "{tmp}/r.html"],
    ("report", "--notes"): ["report", "--root", "{sno}", "--notes", "{v}", "--out", "{tmp}/r.html"],
    ("report", "--verify"): ["report", "--root", "{sno}", "--verify", "{v}", "--out", "{tmp}/r.html"],
    ("screenshot", "--session"): ["screenshot", "--session", "{v}", "--out", "{tmp}/s.png"],
    ("screenshot", "--out"): ["screenshot", "--root", "{sno}", "--out", "{v}"],
    ("snapshot", "snapshot:out"): ["snapshot", "--root", "{sno}", "--no-second", "{v}"],
    ("verify", "--out"): ["verify", "--root", "{sno}", "-c", "1", "--seconds", "0.1", "--out", "{v}"],
}
# The name an output must end with for its command to take it.
SUFFIX = {"--textfile": ".prom", "snapshot:out": ".tar.gz", "--screenshot": ".png", "--hlog": ".hlog"}
SUFFIX_OF = {("report", "--out"): ".html", ("screenshot", "--out"): ".png", ("verify", "--out"): ".json",
             ("plan", "--out"): ""}


def _options():
    """(command path, table key, action) of every option and positional of the CLI."""
    def walk(p, path=()):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    yield from walk(sub, path + (name,))
            else:
                yield " ".join(path), (a.option_strings[-1] if a.option_strings else f"{' '.join(path)}:{a.dest}"), a
    return list(walk(build_parser()))


def _key_of_root(command, key):
    return ("", key) if key == "--root" else (command, key)


def test_every_option_has_a_kind_and_every_kind_its_cases():
    keys = {key for _c, key, _a in _options()}
    assert sorted(keys - set(TABLE)) == [], "give these options a kind in TABLE (and cases if it is new)"
    assert sorted(set(TABLE) - keys) == [], "these options are gone: take them out of TABLE"
    assert sorted({k for k in TABLE.values() if k != "flag"} - set(CASES)) == []


def test_every_file_option_has_a_command_that_reaches_it():
    missing = [(c, key) for c, key, _a in _options() if TABLE.get(key) in ("input", "output", "folder")
               and _key_of_root(c, key) not in REACH]
    assert missing == [], "add a command line that reaches these files' reader or writer to REACH"


def _value_options():
    out = []
    for command, key, action in _options():
        kind = TABLE.get(key)
        if kind in ("number", "url", "size", "choice", "time", "cpulist", "host"):
            out.extend((command, key, action, kind, case) for case in CASES[kind])
    return out


@pytest.mark.parametrize("command, key, action, kind, case", _value_options(),
                         ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None)
def test_a_hostile_value_is_refused_by_its_kinds_parser_in_one_line(command, key, action, kind, case):
    if kind == "choice":
        assert case not in action.choices
        return
    if action.type is not None and kind != "choice":
        parse, errors = action.type, (argparse.ArgumentTypeError, TypeError, ValueError)
    else:
        parse, errors = KIND_PARSERS[kind], (CoremapError,)
    with pytest.raises(errors) as e:
        parse(case)
    line = str(e.value)
    assert "\n" not in line and "\x1b" not in line and len(line) < 400, line


def _hostile(tmp_path, case, suffix=""):
    p = tmp_path / f"hostile-{case}{suffix}"
    if case == "fifo":
        os.mkfifo(p)
    elif case == "zero":
        p.symlink_to("/dev/zero")
    elif case == "sparse":
        with open(p, "wb") as f:
            f.truncate(2 << 30)
    elif case == "file":
        p.write_text("not a folder\n")
    elif case == "link":
        victim = tmp_path / "victim"
        victim.write_text("keep me")
        p.symlink_to(victim)
    elif case == "device":
        if os.geteuid() != 0:
            pytest.skip("a device node of our own takes root")
        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))     # /dev/null's numbers, ours to lose
    return str(p)


def _file_runs(fifo: bool):
    """Every (command, option, argv, case) run; `fifo`: the FIFO cases only, or every other case."""
    runs = []
    for (command, key), argv in sorted(REACH.items()):
        kind = TABLE[key]
        runs.extend((command, key, argv, case) for case in CASES[kind] if (case == "fifo") == fifo)
    return runs


def _prepare(tmp_path, command, key, argv, case):
    """The command line of `command` on a hostile file of `case` for option `key`: (args, path, env)."""
    from tests.machines import extract
    suffix = SUFFIX_OF.get((command, key), SUFFIX.get(key, "")) if TABLE[key] == "output" else ""
    folder = tmp_path / f"{command}{key}"
    folder.mkdir(exist_ok=True)
    v = _hostile(folder, case, suffix)
    args = [a.replace("{v}", v).replace("{tmp}", str(folder)).replace("{sno}", str(extract("sno"))) for a in argv]
    return args, v, {"COREMAP_STATE_DIR": str(folder / "state"), "XDG_CONFIG_HOME": str(folder / "config")}


def _start(tmp_path, command, key, argv, case, env=None):
    """The run of `command` on a hostile file of `case` for option `key`, started: (process, path, lstat)."""
    args, v, own = _prepare(tmp_path, command, key, argv, case)
    env = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen", **own, **(env or {}))
    proc = subprocess.Popen([sys.executable, "-m", "app", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env=env)
    return proc, args, v, os.lstat(v)


def _check(started, case, deadline: float):
    """The run refused its file in one line, before `deadline`, and left the file as it was."""
    proc, args, v, before = started
    try:
        out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"{args}: still running after 20 s") from None
    _refused(subprocess.CompletedProcess(args, proc.returncode, out, err), case, v, before)


def _refused(r: subprocess.CompletedProcess, case, v, before):
    """`r` refused its file `v` in one line and left it as `before` (its lstat) said."""
    out, err = r.stdout, r.stderr
    assert "Traceback" not in err, err[-800:]
    assert r.returncode != 0, (r.args, out[-300:])
    assert "hostile-" in err, (r.args, err[-400:])      # refused naming the file, not for another reason
    assert len(err.strip().splitlines()) <= 2, err[-800:]
    after = os.lstat(v)
    assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino)
    if case == "link":
        assert (Path(v).parent / "victim").read_text() == "keep me"


def _refused_here(tmp_path, capsys, monkeypatch, command, key, argv, case) -> None:
    """The run of `command` on a hostile file of `case`, in this process (run_main), refused as a child's is."""
    args, v, own = _prepare(tmp_path, command, key, argv, case)
    for name, value in own.items():
        monkeypatch.setenv(name, value)
    before = os.lstat(v)
    _refused(run_main(capsys, *args, timeout=20), case, v, before)


def _first_of_kind(command, key, case) -> bool:
    """Whether a run is the first of its kind of file (an input, a folder, an output): it runs as a child
    of its own, the process path (its exit status, its stderr)."""
    kind = TABLE[key]
    firsts = [run for run in _file_runs(fifo=False) if TABLE[run[1]] == kind]
    return (command, key, case) == (firsts[0][0], firsts[0][1], firsts[0][3])


def _zero_input(command, key, case) -> bool:
    """Whether a run is of an input linked to /dev/zero (not the first input's, a child of its own): a
    reader that forgot its bound would read until its process's memory ran out, so these run in a child,
    all in one (_ZeroRuns), never in this process. Every other run reaches the same reader and its
    refusal in this process (run_main), without a Python start and coremap's imports (issue 31)."""
    return TABLE[key] == "input" and case == "zero" and not _first_of_kind(command, key, case)


# The zero-input runs, one after the other in one child: each as run_main runs it (its own environment, its
# stdout and stderr, its exit status, 20 s at most), the results as JSON lines on the child's stdout. One
# child each was 14 Python starts and coremap's imports, 5 s of the suite's CPU (issue 31).
ZERO_RUNS = r"""
import io, json, os, signal, sys, traceback
from app.cli.main import main
def late(_signum, _frame):
    raise TimeoutError("still running after 20 s")
signal.signal(signal.SIGALRM, late)
for line in sys.stdin:
    args, env = json.loads(line)
    os.environ.update(env)
    saved = sys.stdout, sys.stderr
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True) for _ in range(2))
    sys.stdout, sys.stderr = out, err
    signal.setitimer(signal.ITIMER_REAL, 20)
    try:
        rc = main(args)
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    except BaseException:
        traceback.print_exc()
        rc = 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout, sys.stderr = saved
    print(json.dumps([rc, out.buffer.getvalue().decode(), err.buffer.getvalue().decode()]), flush=True)
"""


class _ZeroRuns:
    """The zero-input runs of this module, made and run in one child the first time one is asked for."""

    def __init__(self, folder: Path):
        self.folder, self.done = folder, None

    def result(self, command, key, argv, case):
        """(CompletedProcess, path, lstat before) of the run of `command` on option `key`'s zero input."""
        if self.done is None:
            runs = [run for run in _file_runs(fifo=False) if _zero_input(run[0], run[1], run[3])]
            prepared = [_prepare(self.folder, *run) for run in runs]
            befores = [os.lstat(v) for _args, v, _own in prepared]
            env = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")
            r = subprocess.run([sys.executable, "-c", ZERO_RUNS], cwd=REPO, env=env, capture_output=True, text=True,
                               input="".join(json.dumps([args, own]) + "\n" for args, _v, own in prepared),
                               timeout=20 * len(runs) + 30)
            lines = r.stdout.splitlines()
            assert r.returncode == 0 and len(lines) == len(runs), (r.returncode, r.stderr[-2000:])
            self.done = {(run[0], run[1]): (subprocess.CompletedProcess(args, *json.loads(line)), v, before)
                         for run, (args, v, _own), before, line in zip(runs, prepared, befores, lines)}
        return self.done[(command, key)]


@pytest.fixture(scope="module")
def zero_runs(tmp_path_factory):
    return _ZeroRuns(tmp_path_factory.mktemp("zero"))


@pytest.mark.parametrize("command, key, argv, case", _file_runs(fifo=False),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_a_hostile_file_is_refused_in_one_line_within_20_s(tmp_path, capsys, monkeypatch, zero_runs, command, key,
                                                            argv, case):
    if _first_of_kind(command, key, case):
        _check(_start(tmp_path, command, key, argv, case), case, time.monotonic() + 20)
    elif _zero_input(command, key, case):
        r, v, before = zero_runs.result(command, key, argv, case)
        _refused(r, case, v, before)
    else:
        _refused_here(tmp_path, capsys, monkeypatch, command, key, argv, case)


def test_every_fifo_without_a_writer_is_refused_in_one_line_within_20_s(tmp_path, capsys, monkeypatch):
    # A FIFO is waited on for a writer (app/inputs.py: 10 s), so these wait 0.2 s, as long as any wait
    # for a writer that never comes: one after the other at 10 s they slept 50 s of the suite (issue 31).
    # The first FIFO of each kind of file (an input, a folder, an output) runs as a child, started first;
    # the others run in this process (run_main) while those do: 27 children at once missed the 20 s on a loaded 2-CPU machine, and each cost a Python
    # start and coremap's imports.
    runs = _file_runs(fifo=True)
    short = {STREAM_IDLE_ENV: "0.2"}
    monkeypatch.setenv(STREAM_IDLE_ENV, "0.2")
    children, first = [], {}
    for run in runs:
        first.setdefault(TABLE[run[1]], run)
    try:
        for command, key, argv, case in first.values():
            children.append((_start(tmp_path, command, key, argv, case, short), case, time.monotonic()))
        for command, key, argv, case in runs:
            if (command, key, argv, case) in first.values():
                continue
            _refused_here(tmp_path, capsys, monkeypatch, command, key, argv, case)
        while children:
            one, case, t0 = children.pop(0)
            _check(one, case, t0 + 20)
    finally:
        for (proc, *_rest), _case, _t0 in children:
            proc.kill()
            proc.communicate()
    assert len(first) == 3 and len(runs) >= 5
