"""The command line as htop, lstopo, taskset and hotspot users expect it (issue 23): every probe has its
own help, `probe --help` is one clean usage block, `agent` is hidden, isolate and include have their
own help in the window's words, CPUs are -c/--cpus everywhere (the old spellings still work, with one
note), a probe's "-- COMMAND" reaches it whatever argparse does with "--", and `coremap --help` ends
with the environment variables and exit statuses the code really reads and gives."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from app.cli.main import build_parser, main, parse
from app.cli.parser_tree import command_tree
from app.cli.reference import ENVIRONMENT, EXIT_STATUS, INTERNAL
from probes.catalog import RECORDS
from tests.machines import extract

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture(scope="module")
def sno() -> Path:
    return extract("sno")


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("probe", list(RECORDS))
def test_every_probe_has_its_own_help(capsys, probe):
    rec = RECORDS[probe]
    out = _help(capsys, "probe", probe)
    assert out.startswith(f"usage: coremap probe {probe} ") and out.count("usage:") == 1
    assert "-c LIST, --cpus LIST" in out and "--cpu " not in out
    own = {"--" + f.option.replace("_", "-") for f in rec.fields if f.kind != "command"}
    others = {"--" + f.option.replace("_", "-") for r in RECORDS.values() for f in r.fields
              if f.kind != "command"} - own
    assert all(o in out for o in own)
    assert not any(re.search(rf"{re.escape(o)}\b", out) for o in others), others
    assert ("--hlog" in out) == rec.histogram
    assert ("-- COMMAND" in out) == any(f.kind == "command" for f in rec.fields)


def test_probe_help_is_one_clean_usage_block(capsys):
    out = _help(capsys, "probe")
    assert out.count("usage:") == 1 and "rest" not in out
    assert not re.search(r"\.py\b|\b(?:app|probes|widgets)/", out), out
    for name, rec in RECORDS.items():
        assert re.search(rf"^    {re.escape(name)}\s", out, re.M) and rec.title in out


def test_agent_is_hidden_but_still_runs(capsys):
    out = _help(capsys)
    assert not re.search(r"^\s+agent\b", out, re.M) and re.search(r"^\s+isolate\b", out, re.M)
    assert "Serve coremap's line-delimited JSON protocol" in _help(capsys, "agent")
    with pytest.raises(SystemExit):
        main(["nosuch"])
    err = capsys.readouterr().err
    assert "'isolate'" in err and "agent" not in err
    assert "agent" not in [c.path[-1] for c in command_tree(build_parser()).commands]


def test_isolate_and_include_have_their_own_help_in_the_windows_words(capsys):
    listing = _help(capsys)
    isolate, include = _help(capsys, "isolate"), _help(capsys, "include")
    assert "Quiet → Make quiet…" in isolate and "Quiet → Give back…" in include
    assert "Give back" not in isolate and "Make quiet" not in include
    items = {c.path[-1]: c.summary for c in command_tree(build_parser()).commands}
    assert "Make quiet" in items["isolate"] and "Give back" in items["include"]
    assert re.sub(r"\s+", " ", listing).count("(the window's Quiet →") >= 3      # isolate, include, verify


def test_every_cpu_option_is_spelled_dash_c_cpus():
    """The rule: an option about CPUs is -c/--cpus (taskset's -c); a new `--cpu-list` fails here."""
    seen = []
    for c in command_tree(build_parser()).walk():
        for a in c.options:
            if any("cpu" in s for s in a.strings):
                assert a.strings == ("-c", "--cpus"), (c.name, a.strings)
                seen.append(c.name)
    assert {"coremap pin", "coremap isolate", "coremap include", "coremap verify", "coremap plan",
            "coremap fleet", "coremap probe jitter", "coremap probe scaling"} <= set(seen)


@pytest.mark.parametrize("argv,old,value", [
    (["plan", "--quiet", "2-3"], "--quiet", "2-3"), (["fleet", "h1", "--jitter-cpu", "3"], "--jitter-cpu", 3),
    (["probe", "jitter", "--cpu", "1"], "--cpu", "1"), (["pin", "--irq", "3", "--cpu", "1"], "--cpu", "1"),
    (["isolate", "--cpu", "1"], "--cpu", "1")])
def test_old_spellings_still_work_with_one_note(capsys, argv, old, value):
    from app.cli import common
    common._noted.clear()
    args = parse(build_parser(argv), argv + [old, str(value)])      # given twice: one note
    assert args.cpus == value
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"{old} is now -c/--cpus" in err[0], err
    common._noted.clear()
    new = parse(build_parser(argv), [w if w != old else "-c" for w in argv])
    assert new.cpus == value and capsys.readouterr().err == ""


def test_plan_says_the_same_with_the_old_spelling(capsys, sno):
    assert main(["plan", "-c", "2-3", "--root", str(sno)]) == 0
    new = capsys.readouterr()
    assert main(["plan", "--quiet", "2-3", "--root", str(sno)]) == 0
    old = capsys.readouterr()
    assert old.out == new.out and new.err == "" and "-c/--cpus" in old.err


def test_a_missing_cpu_option_is_named_by_its_current_spelling(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "required: -c/--cpus;" in err and "--quiet" not in err


def test_a_probes_command_after_dashes_reaches_it_whole():
    argv = ["--host", "h", "probe", "counters", "-c", "1", "--", "sh", "-c", "x --cpus 2", "--", "y"]
    args = parse(build_parser(argv), argv)
    assert (args.name, args.cpus, args.command_words) == ("counters", "1", ["sh", "-c", "x --cpus 2", "--", "y"])
    args = parse(build_parser(["probe"]), ["probe", "scaling", "--", "make", "-j"])
    assert args.command_words == ["make", "-j"] and args.cpus is None


def test_a_probe_refuses_what_is_not_its_own(capsys):
    cpu = str(max(os.sched_getaffinity(0)))
    assert main(["probe", "jitter", "-c", cpu, "--", "ls"]) == 2
    assert "a command after -- does not apply to the jitter probe" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["probe", "sweep", "-c", cpu, "--duty", "50"])
    assert "--duty does not apply to the sweep probe; it applies to jitter" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["topology", "--bogus"])
    assert "see `coremap topology --help`" in capsys.readouterr().err


def test_help_ends_with_the_environment_and_exit_statuses(capsys):
    out = re.sub(r"\s+", " ", _help(capsys))
    for name, text in ENVIRONMENT + EXIT_STATUS:
        assert f"{name} {' '.join(text.split()[:4])}" in out
    assert [code for code, _ in EXIT_STATUS][:3] == ["0", "1", "2"]


def _code() -> str:
    return "\n".join(p.read_text() for top in ("app", "probes", "widgets") for p in (REPO / top).rglob("*.py")
                     if p.name != "reference.py")


def test_the_environment_table_is_what_the_code_reads():
    """Every COREMAP_ variable the code names is listed for people or marked internal; every variable
    listed is named in the code (a listed one no longer read fails, as does a new one not listed)."""
    code = _code()
    named = set(re.findall(r"[\"'](COREMAP_[A-Z_]+)[\"']", code))
    listed = {n.strip() for name, _ in ENVIRONMENT for n in name.split(",")}
    assert named - listed - set(INTERNAL) == set()
    for name in listed | set(INTERNAL):
        assert re.search(rf"[\"']{name}[\"']", code), name


def test_every_help_string_formats(capsys):
    """argparse fills %(default)s in help when it is printed: a bare % (`busy %`) made `coremap --help`
    raise; the tree reads every help as --help does."""
    tree = command_tree(build_parser())
    assert len(list(tree.walk())) > 25
    for c in tree.walk():
        if c.path:
            assert c.name in _help(capsys, *c.path)
