"""One way to read a number (issue 24, class 2): ASCII digits only, finite, in range, with the option's
or the file's name in the one-line error. Every numeric option of every command and every probe is
tried with other scripts' digits, nan, inf, an empty text and values past any bound; the fields of the
files a capture supplies are tried with the same."""
from __future__ import annotations

import argparse
import ast
import importlib
import io
import time
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from app.cli.main import build_parser
from app.errors import CpuListError, ParseError, SysRootReadError
from app.parse.cpulist import parse_cpumask
from app.parse.interrupts import parse_interrupts
from app.parse.meminfo import parse_meminfo
from app.parse.number import NumberError, parse_float, parse_int
from app.parse.stat import parse_stat
from app.parse.task_stat import parse_status, parse_task_stat, sched_counts
from app.parse.topology import parse_distances, parse_topology_id
from app.sysroot import SysRoot
from app.machine.topology.files import cpu_dir_ids, read_int
from probes.common import ProbeError
from tests.hostile.conftest import REPO, run_cli, run_main
from tests.hostile.sources import product_modules
from tests.hostile.test_option_table import TABLE

BAD_NUMBERS = ["١", "٣٫٥", "１", "²", "", " ", "nan", "inf", "-inf", "1e999", "1_0", "0x10", "+-1", "9" * 400]
PROBES = ("c2c", "counters", "first_touch", "jitter", "messaging", "scaling", "sweep", "wakeup")


def _numeric_options(parser: argparse.ArgumentParser, prefix=()):
    """(argv prefix, option string) of every option with a type, through every subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _numeric_options(sub, (*prefix, name))
        elif action.option_strings and action.type is not None and action.type is not str \
                and TABLE.get(action.option_strings[-1]) != "text":
            # a text option's type checks a word, not a number (pin --irq: 24, 24-25 or 'eth0-TxRx-*')
            yield prefix, action.option_strings[-1], action


def _all_options():
    parser = build_parser()         # once: built per option, it cost every collecting process 2 s
    out = [(("coremap",), parser, *o) for o in _numeric_options(parser)]
    for name in PROBES:
        p = importlib.import_module(f"probes.{name}.measure").build_parser()
        out += [((f"probes {name}",), p, *o) for o in _numeric_options(p)]
    return out


OPTIONS = _all_options()


def test_every_numeric_option_is_found():
    names = {opt for _, _, _, opt, _ in OPTIONS}
    # A sample of the options issue 24 names: the walk above must reach them.
    assert {"--interval", "--seconds", "--pid", "--ticks", "--duty", "--threads", "--size", "--tid"} <= names


@pytest.mark.parametrize("where,parser,prefix,option,action", OPTIONS,
                         ids=[f"{w[0]}:{' '.join(p)}{' ' if p else ''}{o}" for w, _, p, o, _ in OPTIONS])
def test_every_numeric_option_refuses_what_is_not_a_number(where, parser, prefix, option, action):
    for text in BAD_NUMBERS:
        if action.type.__name__ == "size" and text in ("0x10",):
            continue            # a size's own grammar (app/parse/size.py) refuses it below as well
        err = io.StringIO()
        # coremap's parsers exit 2 with one line on stderr; a probe's raises ProbeError (its runner
        # sends the line to the CLI or the window as an `error` message).
        with redirect_stderr(err), pytest.raises((SystemExit, ProbeError)) as e:
            parser.parse_args([*prefix, f"{option}={text}", *_required(parser, prefix, option)])
        line = err.getvalue() if e.type is SystemExit else str(e.value) + "\n"
        assert e.type is ProbeError or e.value.code == 2, (option, text)
        # argparse names an option by all its spellings ("-c/--cpus"), an alias among them or not
        assert line.count("\n") == 1 and any(o in line for o in action.option_strings), (option, text, line)


def _required(parser, prefix, option) -> list[str]:
    # Options a command cannot be parsed without (pin --cpus, report/screenshot --out).
    sub = parser
    for name in prefix:
        sub = next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    out = []
    for a in sub._actions:
        if a.required and a.option_strings and a.option_strings[-1] != option:
            out += [a.option_strings[-1], "x.png" if "out" in a.dest else "0"]
    return out


def test_no_option_takes_int_or_float_directly():
    """argparse's type=int and type=float take '١', nan and inf: every numeric option goes through
    app/parse/number.py (bounded, whole, pixel_size, bounded_size)."""
    bad = []
    for path, tree in product_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "type" and isinstance(node.value, ast.Name) \
                    and node.value.id in ("int", "float"):
                bad.append(f"{path.relative_to(REPO)}:{node.value.lineno}")
    assert bad == []


def test_the_cli_says_which_option_in_one_line(capsys):
    r = run_cli("threads", "--pid", "١")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "--pid" in r.stderr and "not a whole number" in r.stderr
    # The same refusal of argparse's (the child above is its process path), in this process (run_main).
    r = run_main(capsys, "screenshot", "--out", "x.png", "--size", "")
    assert r.returncode == 2 and "--size" in r.stderr and "WIDTHxHEIGHT" in r.stderr
    r = run_main(capsys, "--interval", "١", "topology")
    assert r.returncode == 2 and "--interval" in r.stderr


@pytest.mark.parametrize("text", BAD_NUMBERS)
def test_the_one_reader_refuses_and_names_what(text):
    with pytest.raises(NumberError, match="^proc/x"):
        parse_int(text, what="proc/x", lo=0, hi=10 ** 6)
    with pytest.raises(NumberError, match="^proc/x"):
        parse_float(text, what="proc/x", lo=0, hi=10 ** 6)


def test_the_one_reader_takes_what_is_a_number():
    assert parse_int(" 42\n", what="x", lo=0, hi=100) == 42
    assert parse_int("0x1f", what="x", base=16) == 31
    assert parse_float("2.5e-3", what="x", lo=0, hi=1) == 0.0025
    with pytest.raises(NumberError, match="give 0 to 100"):
        parse_int("101", what="x", lo=0, hi=100)


# -- fields of the files a capture supplies -------------------------------------------------------------
def test_capture_fields_take_ascii_digits_only(tmp_path):
    core = tmp_path / "sys/devices/system/cpu/cpu0/topology/core_id"
    core.parent.mkdir(parents=True)
    core.write_text("١\n")
    (tmp_path / "sys/devices/system/cpu/cpu١").mkdir()
    root = SysRoot(tmp_path)
    with pytest.raises(SysRootReadError, match="expected an integer"):
        root.read_int(core)
    with pytest.raises(SysRootReadError, match="expected an integer"):
        read_int(root, core)
    assert cpu_dir_ids(root) == [0]            # "cpu١" is not CPU 1
    with pytest.raises(ParseError):
        parse_topology_id("١")
    with pytest.raises(ParseError):
        parse_distances("10 ٢١")
    with pytest.raises(ParseError):
        parse_meminfo("MemTotal: ١٠٠ kB\n")
    with pytest.raises(ParseError):
        parse_status("Tgid:\t١\n")
    assert sched_counts("se.nr_migrations : ٥\n") == (None, None, None)
    stat = "12 (x) S " + " ".join(["1"] * 50)
    assert parse_task_stat(stat).tid == 12
    for bad in ("١٢ (x) S " + " ".join(["1"] * 50), "12 (x) S " + " ".join(["١"] * 50),
                "12 (x) S " + " ".join(["1_0"] * 50)):
        with pytest.raises(ParseError):
            parse_task_stat(bad)


def test_cpu_ids_stay_in_range():
    t0 = time.thread_time()
    with pytest.raises(CpuListError, match="wider than any machine"):
        parse_cpumask(",".join(["ffffffff"] * 200_000))         # 6.4 million CPU ids
    assert time.thread_time() - t0 < 1.0
    assert len(parse_cpumask(",".join(["ffffffff"] * 2048))) == 65536
    with pytest.raises(ParseError, match="is not CPUn"):
        parse_interrupts("CPU0 CPU99999999\n 1: 0 0 x\n")
    with pytest.raises(ParseError, match="is not CPUn"):
        parse_interrupts("CPU0 CPU١\n 1: 0 0 x\n")
    with pytest.raises(ParseError, match="neither 'cpu' nor 'cpuN'"):
        parse_stat("cpu 1 1 1 1\ncpu99999999 1 1 1 1\n")
