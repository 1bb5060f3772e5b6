"""`coremap --host [user@]server[:port] COMMAND ...`: every command on another machine, over ssh.

How each command meets the host (one connection, app/remote/):
- most commands (topology, irqs, threads, pin, undo, redo, restore, journal, plan, and any added
  later) run on the server as they would there: the agent runs `coremap COMMAND ...` and streams its
  output back as it comes; the exit status is the server's. Pins therefore use the server's own
  AffinityService and journal, and a pin the SSH user may not make goes through `sudo -n` there
  (the line says so when sudo wants a password). Its stdout is made printable here (a server is not
  trusted to send only text), its stderr lines are prefixed with the host.
- `probe` runs here, its jobs there (app/remote/probe_runs.py): the results print, and --json and
  --hlog write, on this machine, as for a local probe.
- `snapshot OUT` is taken there and written here; `report` and `screenshot` are made here from such
  a snapshot (so they say which host they are of).
- `agent` and `fleet` refuse --host (the agent is what --host starts; a fleet names its hosts).
Options that name a file on this machine (`irqs --file`) are refused with --host: the file is here,
the command would run there.
"""
from __future__ import annotations

import sys

from app.atomic import check_output_path, write_atomic
from app.cli.snapshot import print_result
from app.errors import CoremapError
from app.format import printable_lines
from app.remote.capture import capture_session, fetch_snapshot
from app.remote.client import AgentClient
from app.remote.hosts import HostSpec, parse_host
from app.remote.probe_runs import RemoteProbeRun
from app.store.capture import SnapshotResult

ON_CAPTURE = ("report", "screenshot")
REFUSED = {
    "agent": "coremap agent is what --host starts on a server; run it without --host",
    "fleet": "coremap fleet takes its hosts as arguments (coremap fleet H1 H2 ...); drop --host",
}
LOCAL_FILES = {"irqs": ("file",)}


class HostArgumentError(CoremapError):
    """A command or option that cannot go with --host."""


def run_on_host(args, argv: list[str]) -> int:
    host = parse_host(args.host)
    cmd = args.command
    if cmd in REFUSED:
        raise HostArgumentError(REFUSED[cmd])
    for dest in LOCAL_FILES.get(cmd, ()):
        if getattr(args, dest, None):
            raise HostArgumentError(f"--{dest} names a file on this machine, but with --host the command runs "
                                    f"on {host}; copy the file there and run it there, or drop --host")
    if cmd in ON_CAPTURE and getattr(args, "session", None):
        raise HostArgumentError("--host and --session both given: a session is a file here; drop --host")
    client = AgentClient.connect(host)
    try:
        if cmd == "snapshot":
            return _snapshot(client, args)
        if cmd in ON_CAPTURE:
            return _on_capture(client, args)
        if cmd == "probe":
            args.start_probe = RemoteProbeRun.starter(lambda: client if client.alive else None)
            return int(args.func(args) or 0)
        return forward(client, host, command_argv(argv, cmd))
    finally:
        client.close()


def command_argv(argv: list[str], command: str) -> list[str]:
    """`argv` without the top-level --host option (which comes before the command)."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a == command:
            return out + argv[i:]
        if a.startswith("--ho") and "--host".startswith(a.split("=", 1)[0]):
            i += 1 if "=" in a else 2
            continue
        out.append(a)
        i += 1
    return out


def forward(client: AgentClient, host: HostSpec, argv: list[str], out=None, err=None) -> int:
    """`coremap ARGV` on the server, its output here as it comes; its exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    partial = [""]

    def on_event(ev: dict) -> None:
        text = ev.get("out")
        if isinstance(text, str):
            out.write(printable_lines(text))
            out.flush()
        text = ev.get("err")
        if isinstance(text, str):
            lines = (partial[0] + text).split("\n")
            partial[0] = lines.pop()
            for line in lines:
                err.write(_err_line(host, line))
            err.flush()

    pending = client.start("run", argv=argv, on_event=on_event)
    try:
        res = pending.wait(None)
    except KeyboardInterrupt:
        pending.cancel()
        raise
    if partial[0]:
        err.write(_err_line(host, partial[0]))
    rc = res.get("rc") if isinstance(res, dict) else None
    if type(rc) is not int:
        return 1
    return rc if 0 <= rc <= 255 else 128 - rc if -64 <= rc < 0 else 1


def _err_line(host: HostSpec, line: str) -> str:
    line = printable_lines(line.replace("\t", " "))
    return f"coremap: {host}: {line.removeprefix('coremap: ')}\n"


def _snapshot(client: AgentClient, args) -> int:
    out = check_output_path(args.out, "snapshot")
    data, tar = fetch_snapshot(client, interval=args.snapshot_interval, second=not args.no_second,
                               root=getattr(args, "root", None))
    write_atomic(out, data)
    interval = tar.meta.get("interval")
    skipped = tar.meta.get("skipped")
    print_result(SnapshotResult(out, printable_lines(tar.top), tar.files, tar.links,
                                interval if type(interval) in (int, float) else None,
                                [str(s) for s in skipped] if isinstance(skipped, list) else []))
    return 0


def _on_capture(client: AgentClient, args) -> int:
    """`report` / `screenshot` of a snapshot the host takes now (two captures of its counters, a
    second apart, so the picture shows rates)."""
    session = capture_session(client, interval=1.0, root=getattr(args, "root", None))
    try:
        # The command opens the snapshot brought here (open_host), not the host over ssh once more.
        args.root, args.host = str(session.machine_dir), None
        return int(args.func(args) or 0)
    finally:
        session.close()
