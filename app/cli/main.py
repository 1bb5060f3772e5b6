"""`coremap`: the parser of every subcommand (one module per command in app/cli/, each with
`register(subparsers)`), and the window when no subcommand is given. The GUI (and so Qt) is imported
only when the window is asked for, so every subcommand runs on a headless server.

`coremap --help` ends with the environment variables and exit statuses (app/cli/reference.py, the
man page's too); `coremap --man` prints the manual page and `coremap --completion bash|zsh` the
completion script, each generated from this parser (app/cli/manpage.py, completion.py; the copies
installed with the wheel are man/coremap.1 and completions/, written by `make man`). `agent` is registered without
help, so help, the manual and completion leave it out: `--host` starts it, people do not.
"""
from __future__ import annotations

import argparse
import importlib
import signal
import sys

import app
import app.cli
from app.cli.common import (OneLineParser, bounded, output_path, pixel_size, subcommands, take_notes,
                            terminal_text)
from app.cli.reference import epilog
from app.errors import CoremapError
from app.parse.url import url_argument
from app.sampling.interval import MAX_INTERVAL, MIN_INTERVAL

# Each subcommand and the module of app/cli that registers it (the others: main, common, desktop,
# host), in the order `coremap --help` lists them. Named rather than discovered: pkgutil's discovery
# imports `inspect`; and a run registers only its own command's module when the command can be told
# from the arguments, since importing and registering all of them was a tenth of `coremap journal
# --json` (tests/unit/test_cli_imports.py checks this table against what the modules register).
COMMANDS = {"agent": "agent", "cpus": "cpus", "diff": "diff", "export": "export", "fleet": "fleet", "guard": "guard", "irqs": "irqs", "pin": "pin",
            "undo": "pin", "redo": "pin", "restore": "pin", "journal": "pin", "plan": "plan", "probe": "probe", "sched": "sched",
            "isolate": "quiet", "include": "quiet", "report": "report", "screenshot": "screenshot",
            "snapshot": "snapshot", "threads": "threads", "topology": "topology", "verify": "verify"}
COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))
# The commands whose arguments may end in "-- COMMAND" (the words are cut off before argparse sees
# them: app/cli/probe.py says why).
RUN_A_COMMAND = ("probe",)
SHELLS = ("bash", "zsh")
MAX_NOTES_SHOWN = 10


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given the arguments, only their command's module is registered when the
    command can be told (else every one, as for --help or a misspelt command)."""
    p = OneLineParser(
        prog="coremap", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog,
        description="See CPU topology, interrupts and threads; pin them; make CPUs quiet; measure jitter\n"
                    "per CPU. Without a command, opens the window; each command does what one of its\n"
                    "menus does, headless.")
    p.add_argument("--root", metavar="DIR",
                   help="open a captured machine (an extracted `coremap snapshot` or fixture) instead of this one")
    p.add_argument("--screenshot", metavar="OUT.png",
                   help="render the window offscreen after the first samples, save it, and exit")
    p.add_argument("--color-by", metavar="METRIC", default=None,
                   help="metric that colours the grid: irq, softirq[:KIND], irqtime, busy, residency, idle[:STATE], ghz")
    p.add_argument("--size", metavar="WxH", type=pixel_size, default=None, help="window size for --screenshot, e.g. 1600x1000")
    p.add_argument("--interval", type=bounded(MIN_INTERVAL, MAX_INTERVAL), default=1.0, metavar="S",
                   help="sampling interval in seconds, 0.25-5 (default 1)")
    p.add_argument("--session", metavar="FILE", help="open a saved .coremap session")
    p.add_argument("--install-desktop", action="store_true",
                   help="add coremap to your desktop's menu (.desktop entry and icon under ~/.local/share) and exit")
    p.add_argument("--host", metavar="[USER@]SERVER[:PORT]",
                   help="another machine over ssh: the window live on it, or any command run there "
                        "(coremap --host node7 irqs --interval 1)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--pcp", metavar="URL", type=url_argument("--pcp"),
                     help="with --host NAME: that host's pmcd through this pmproxy, live in the window (read-only)")
    src.add_argument("--prometheus", metavar="URL", type=url_argument("--prometheus"),
                     help="with --host INSTANCE: that host from this Prometheus, live in the window (read-only)")
    p.add_argument("--captures", metavar="DIR", help="with --pcp or --prometheus: a folder of coremap snapshots; "
                                                     "the host's capture completes the topology the source gives")
    p.add_argument("--pcp-archive", metavar="ARCHIVE", help="replay a pmlogger archive in the window (with --at)")
    p.add_argument("--at", metavar="TIME", help="replay --session, --pcp-archive or --prometheus --host as of TIME: "
                                                "seconds from the start (90), from the end (-30), end, or 2026-11-25T13:40")
    p.add_argument("--source-config", metavar="FILE", help="the sources' token and CA files (default "
                                                           "~/.config/coremap/sources.ini)")
    p.add_argument("--man", action="store_true", help="print the manual page (roff) and exit: coremap --man | man -l -")
    p.add_argument("--completion", choices=SHELLS, metavar="SHELL",
                   help="print the completion script for bash or zsh and exit: "
                        "source <(coremap --completion bash)")
    p.add_argument("--version", action="version", version=f"coremap {app.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    command = None if argv is None else _command_in(argv, p)
    for name in COMMAND_MODULES if command is None else (COMMANDS[command],):
        importlib.import_module(f"app.cli.{name}").register(sub)
    return p


def _command_in(argv: list[str], parser: argparse.ArgumentParser) -> str | None:
    """The subcommand `argv` names, skipping the main parser's options and their values; None when
    it names none that is known, or when an option is ambiguous (the full parser then says why)."""
    at = _command_at(argv, parser)
    return None if at is None else argv[at]


def _command_at(argv: list[str], parser: argparse.ArgumentParser) -> int | None:
    """Where in `argv` its subcommand is (see _command_in); None when it names none."""
    valued = [s for a in parser._actions if a.nargs != 0 for s in a.option_strings]
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            return None
        if tok.startswith("-") and tok != "-":
            if "=" not in tok:
                # argparse takes unique prefixes of long options (allow_abbrev)
                hits = [o for o in valued if o == tok or (tok.startswith("--") and o.startswith(tok))]
                if len(hits) > 1 and tok not in hits:
                    return None
                if hits:
                    i += 1                  # its value
            i += 1
            continue
        return i if tok in COMMANDS else None
    return None


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The arguments, with a probe's "-- COMMAND" in `command_words`: cut off before argparse reads
    the rest, at the first "--" after the command (an option's value may not be "--" there)."""
    at = _command_at(argv, parser)
    cut = argv.index("--", at) if at is not None and argv[at] in RUN_A_COMMAND and "--" in argv[at:] else None
    args, extra = parser.parse_known_args(argv if cut is None else argv[:cut])
    if extra:
        # Said by the (sub)command they were given to, which names its own --help (argparse says it
        # at the top: "coremap: unrecognized arguments: --duty 50; see `coremap --help`").
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    if cut is not None:
        args.command_words = [*getattr(args, "command_words", ()), *argv[cut + 1:]]
    return args


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the innermost subcommand `args` name (`coremap probe jitter`'s)."""
    sub = subcommands(parser)
    name = getattr(args, sub.dest, None) if sub is not None else None
    return parser if name not in (sub.choices if sub is not None else {}) else _innermost(sub.choices[name], args)


def main(argv: list[str] | None = None) -> int:
    _never_crash_on_encoding()
    _exit_cleanly_on(signal.SIGTERM, signal.SIGHUP)
    argv = list(sys.argv[1:] if argv is None else argv)
    with terminal_text():
        return _main(argv)


def _main(argv: list[str]) -> int:
    parser = build_parser(argv)
    args = parse(parser, argv)
    if args.man or args.completion:
        return _generated(args)
    try:
        if getattr(args, "host", None) is not None:
            # Checked before anything runs: `--host ''` (an unset variable) ran a pin on this machine.
            from app.remote.hosts import HostError, parse_host
            try:
                parse_host(args.host)
            except HostError as e:
                raise HostError(f"--host {args.host[:60]!r}: {e}") from None
        if (getattr(args, "at", None) or getattr(args, "pcp_archive", None)) and args.command is not None:
            raise CoremapError("--at opens the window as of a moment; give no command with it")
        if getattr(args, "captures", None) and not (getattr(args, "pcp", None) or getattr(args, "prometheus", None)):
            raise CoremapError("--captures completes what a metrics source lacks: give it with --pcp URL or "
                               "--prometheus URL (and --host, or `coremap fleet`)")
        if (getattr(args, "pcp", None) or getattr(args, "prometheus", None)) and args.command not in (None, "fleet"):
            # `coremap fleet --pcp URL` is the fleet's own option; anywhere else it opens one host in the
            # window (app/sources/live.py open_host).
            raise CoremapError("--pcp and --prometheus open the window on one host (with --host); commands run "
                               "on this machine or over ssh, so give one or the other")
        if getattr(args, "host", None) and args.command is not None:
            # Imported here: only --host needs ssh and the agent's client.
            from app.cli.host import run_on_host
            return run_on_host(args, argv)
        if args.install_desktop:
            # Imported here: the desktop files are package data of an installed coremap, which the agent
            # shipped to a server without coremap (app/remote/ship.py) does not carry; and it buys every
            # other command start-up time.
            from app.cli import desktop
            return desktop.run(args)
        if args.command is None:
            return _gui(args)
        return int(args.func(args) or 0)
    except CoremapError as e:
        print(f"coremap: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `coremap irqs | head`: the reader went away; nothing more to say.
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        _print_notes()


def _generated(args) -> int:
    """The manual page or a completion script, of the whole parser, on stdout."""
    # Imported here: only these two options need the generators.
    if args.man:
        from app.cli.manpage import man_page
        sys.stdout.write(man_page(build_parser()))
    else:
        from app.cli.completion import completion_script
        sys.stdout.write(completion_script(build_parser(), args.completion))
    return 0


def _print_notes() -> None:
    notes = take_notes()
    for n in notes[:MAX_NOTES_SHOWN]:
        print(f"coremap: note: {n}", file=sys.stderr)
    if len(notes) > MAX_NOTES_SHOWN:
        print(f"coremap: note: {len(notes) - MAX_NOTES_SHOWN} more files of the capture were refused",
              file=sys.stderr)


def _exit_cleanly_on(*signals) -> None:
    """SIGTERM and SIGHUP end a command through Python, as Ctrl+C does, so `finally` blocks and exit
    handlers run: a report's capture folder in /tmp is removed, a probe run is cancelled. (Probe
    children die with us in any case: probes/runner.py.)"""
    def stop(signum, _frame):
        raise SystemExit(128 + signum)
    for sig in signals:
        signal.signal(sig, stop)


def _never_crash_on_encoding() -> None:
    """Names from the machine and coremap's own µ and · reach terminals and pipes whose encoding may not
    hold them (LANG=en_US.ISO-8859-1, PYTHONIOENCODING=ascii): escape what does not fit, never raise."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and stream.errors == "strict":
            reconfigure(errors="backslashreplace")


def _gui(args) -> int:
    # Before Qt starts: without a display its xcb plugin aborts the process with a misleading
    # "xcb-cursor0 … is needed" (issue 23); one line here says what is wrong instead.
    from app.cli.desktop import require_display
    from app.sources.live import open_host
    require_display(args)
    if getattr(args, "screenshot", None):
        # Before a machine is opened: a bad path costs nothing.
        output_path(args.screenshot, "--screenshot", (".png", ".jpg", ".jpeg", ".bmp"), ".png")
    # Opened before Qt is loaded, from this (the main) thread: a machine that cannot be opened (a host
    # that cannot be reached, a damaged session, a source without that host) is one line and exit
    # status 2, and an ssh started here lives as long as the process.
    host = open_host(args)
    try:
        # Imported here, not at the top: the window (and Qt) is loaded only when it is asked for.
        try:
            from widgets.application import run_gui
        except ImportError as e:
            print(f"coremap: the window needs PySide6 and pyqtgraph ({e}); "
                  "install them with `make run`, or use a subcommand (coremap --help)", file=sys.stderr)
            return 2
        return run_gui(args, host)
    finally:
        host.close()
