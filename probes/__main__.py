"""`python -m probes NAME --cpu N [options]`: one probe, one process, JSON lines on stdout.

Checks the CPU before any loop: a bad, offline or disallowed CPU gives one `error` line naming the
CPU and the allowed set, and exit status 2.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

from app.errors import CoremapError
from probes import PARENT_ENV
from probes.catalog import NAMES, RECORDS
from probes.common import EXIT_BAD_INPUT, check_cpus, emit, log, pin

EXIT_PARENT_GONE = 3                # nobody reads our lines: the parent died, or the reader closed


def die_with_parent() -> None:
    """SIGKILL this probe when the process that started it dies (prctl PR_SET_PDEATHSIG), and exit now
    if it already has. SIGKILL, not SIGTERM: a probe blocked in a native call (counters waiting for
    its command) could not run a Python handler; what a killed probe leaves (a tracefs instance) is
    removed by the next run. A counted command gets the same signal from its own child side
    (_native.count_command), so it goes with the probe."""
    parent = os.environ.get(PARENT_ENV)
    if not parent or not parent.isdigit():
        return                          # started by hand, not by a ProbeRun
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(parent):
        os._exit(EXIT_PARENT_GONE)      # the parent died before the prctl: nobody reads us


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in NAMES:
        emit({"type": "error", "message": f"name a probe: one of {', '.join(NAMES)}"})
        return EXIT_BAD_INPUT
    name = argv[0]
    # Cancel sends SIGTERM: exit through Python so `finally` blocks run (the jitter probe removes its
    # tracefs instance there). The handler runs when the current chunk returns, within ~100 ms; the
    # runner's SIGKILL after that is the backstop, and the next attributed run removes what it left.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rec = RECORDS[name]                 # a name of NAMES, checked above
    mod = rec.measure
    try:
        args = mod.build_parser().parse_args(argv[1:])
        args.cpu_ids = ()
        args.cpu_id = None
        if not rec.per_cpu:
            if args.cpu is not None:
                args.cpu_ids = check_cpus(args.cpu)
        elif not args.unbound or args.cpu is not None:
            (args.cpu_id, *rest) = check_cpus(args.cpu)
            if rest:
                raise CoremapError(f"--cpu {args.cpu!r}: {name} runs on one CPU per process; "
                                   "the coremap CLI runs one process per CPU of a list")
            if not args.unbound and rec.pin:
                pin(args.cpu_id)
        return int(mod.run(args, emit) or 0)
    except CoremapError as e:
        emit({"type": "error", "message": str(e)})
        return EXIT_BAD_INPUT
    except ImportError as e:
        emit({"type": "error", "message": f"probes._native is not built ({e}); run `pip install -e .`"})
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # whoever read our lines stopped (`| head` by hand; a ProbeRun's parent takes us down with it):
        # nobody to tell, and a traceback about it would only bury what the reader did print
        return EXIT_PARENT_GONE
    except OSError as e:
        log(f"{type(e).__name__}: {e}")
        emit({"type": "error", "message": f"{name}: {e}"})
        return 1


if __name__ == "__main__":
    status = main()
    # What a probe leaves is ended in main's `finally` blocks: the interpreter's teardown after them only
    # held the exit the runner waits for, 30-120 ms a run (issue 31). SIGTERM's SystemExit ends as before.
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        status = EXIT_PARENT_GONE
    sys.stderr.flush()
    os._exit(status)
