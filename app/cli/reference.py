"""What `coremap --help` ends with and the man page's ENVIRONMENT and EXIT STATUS sections hold: the
environment variables coremap reads and the exit statuses it gives, each table written once here.

Only what the code does: each variable is read where the comment beside it says, and each status is
returned there. Variables coremap sets for its own children and the tests' own (INTERNAL) are not for
people to set and are left out.
"""
from __future__ import annotations

# (name, what it changes). Read in: app/store/folders.py (state, reports, documents), app/sources/http.py
# (COREMAP_SOURCES), app/remote/transport.py (ssh command, XDG_RUNTIME_DIR), app/remote/ship.py (the
# agent and Python a server runs), app/remote/bootstrap.py (the server's XDG_CACHE_HOME),
# app/cli/desktop.py (XDG_DATA_HOME, the display), app/cli/common.py ensure_headless_qt (the display
# of drawing commands), probes/pretouch.py (JAVA_TOOL_OPTIONS).
ENVIRONMENT: tuple[tuple[str, str], ...] = (
    ("COREMAP_STATE_DIR", "the state folder: the pin journal, autosaved sessions (default "
                          "$XDG_STATE_HOME/coremap, else ~/.local/state/coremap); it must be yours, mode 0700"),
    ("COREMAP_REPORTS_DIR", "where screenshots, sessions and reports go by default (default coremap/ in "
                            "the documents folder, else reports/ in the state folder)"),
    ("COREMAP_SOURCES", "the metrics sources' token and CA file settings, when --source-config is not "
                        "given (default $XDG_CONFIG_HOME/coremap/sources.ini, else ~/.config/coremap/sources.ini)"),
    ("COREMAP_SSH_COMMAND", "the ssh command of --host and fleet, split as a shell would "
                            "(default ssh; e.g. \"ssh -F ~/lab/config\")"),
    ("COREMAP_REMOTE_AGENT", "what --host runs on a server: auto (its installed coremap, else a copy "
                             "sent over ssh; the default), ship (always the copy) or installed (never send)"),
    ("COREMAP_REMOTE_PYTHON", "the Python --host starts on a server (default python3 on its login PATH)"),
    ("XDG_STATE_HOME", "holds the state folder (see COREMAP_STATE_DIR)"),
    ("XDG_CONFIG_HOME", "holds coremap/sources.ini, the window's coremap/settings.ini and user-dirs.dirs "
                        "(default ~/.config)"),
    ("XDG_DOCUMENTS_DIR", "the documents folder, else its line in user-dirs.dirs, else ~/Documents"),
    ("XDG_DATA_HOME", "where --install-desktop writes the menu entry and icons (default ~/.local/share)"),
    ("XDG_RUNTIME_DIR", "holds the ssh connection sockets of --host and fleet when it is yours and "
                        "private (else ~/.cache/coremap/ssh)"),
    ("XDG_CACHE_HOME", "on a server reached with --host: where the copy of coremap sent there is kept "
                       "(default ~/.cache/coremap-agent)"),
    ("DISPLAY, WAYLAND_DISPLAY", "the display the window opens on; without either the window says so "
                                 "and exits, and commands that draw (screenshot, report, --screenshot) "
                                 "draw offscreen"),
    ("QT_QPA_PLATFORM", "the window's Qt platform (offscreen draws without a display; set so by the "
                        "drawing commands when there is none)"),
    ("JAVA_TOOL_OPTIONS", "kept for `probe first-touch -- COMMAND` when COMMAND is not java itself: "
                          "-XX:+AlwaysPreTouch is added to it for the second run"),
)

# What coremap sets for its own children, or only its tests set: read, but not for people
# (tests/unit/test_cli_help.py holds every COREMAP_ variable the code names to one of the two lists).
INTERNAL = ("COREMAP_PROBE_PARENT", "COREMAP_AGENT_SHIPPED", "COREMAP_WRITABLE_TEST_ROOTS",
            "COREMAP_BUSY_LOOK_S", "COREMAP_STREAM_IDLE_S")

# (status, when). Returned by: app/cli/main.py (2 for every error coremap words, 130 on Ctrl+C,
# 128 + the signal on SIGTERM and SIGHUP), argparse (2 for bad usage), and the commands (1 in pin,
# undo, redo, restore, isolate, include, verify, fleet, threads --name, and --host's relay).
EXIT_STATUS: tuple[tuple[str, str], ...] = (
    ("0", "done as asked (a thread that exited during a pin is churn, not a failure)"),
    ("1", "it ran, but part of it failed: a pin, undo, isolate or include write (or every target it "
          "named had exited), a verify step, a fleet host that could not be read, a threads --name that "
          "matched nothing; with --host, the server's own status (1 when none came back)"),
    ("2", "bad input or a refusal, said in one line on stderr with what to do: an unknown option, a "
          "CPU list like 2-x, a thread or IRQ that does not exist, a file that is not what it should be, "
          "no display for the window"),
    ("130", "interrupted (Ctrl+C)"),
    ("129, 143", "ended by SIGHUP or SIGTERM (128 + the signal), cleaning up as for Ctrl+C"),
)


def epilog(width: int | None = None) -> str:
    """The end of `coremap --help`: the environment and the exit statuses, one entry each, wrapped to
    `width` (default: the terminal's, as argparse wraps the rest, within 60 to 100 columns)."""
    import shutil           # here: only help needs them
    import textwrap
    width = width or min(100, max(60, shutil.get_terminal_size().columns - 2))
    out: list[str] = []
    for title, rows in (("environment:", ENVIRONMENT), ("exit status:", EXIT_STATUS)):
        out += [title]
        for name, text in rows:
            lines = textwrap.wrap(text, width - 26, break_on_hyphens=False)
            first = f"  {name:<22}  " if len(name) <= 22 else f"  {name}\n  {'':<22}  "
            out += [first + lines[0]] + [f"  {'':<22}  {line}" for line in lines[1:]]
        out += [""]
    out += ["Each command's options: coremap COMMAND --help. The manual: coremap --man | man -l -"]
    return "\n".join(out)
