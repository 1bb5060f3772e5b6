"""The test modules' rewritten asserts, made once by the xdist controller before its workers start.

pytest rewrites a test module's asserts when it imports it and keeps the result in the module's
__pycache__ (a `-pytest-` .pyc checked by the source's hash). A fresh clone has none, and `make test`'s
xdist workers all start collecting at once: each of the three rewrote all 188 modules itself (issue 31:
7-10 s of a worker's CPU to collect, 3.3-3.7 s with the .pycs there; 26 s of the run's CPU, 20 s
after). Written here first, on every CPU, each worker finds them and only reads them. Uses pytest's own
rewrite and writer (_pytest.assertion.rewrite), so a worker's check of a .pyc is the one it makes of
its own; where they are missing (another pytest), the workers rewrite as they did."""
from __future__ import annotations

import os
import sys
from pathlib import Path


def rewrite_test_modules(config) -> None:
    """In the xdist controller of a run that may write bytecode: each test module and conftest under the
    testpaths whose rewritten .pyc is missing or stale, rewritten and written, the work split over this
    process and one forked child per other CPU it may use. Nothing is collected or imported."""
    if not config.getoption("numprocesses", None) or hasattr(config, "workerinput") or sys.dont_write_bytecode:
        return
    try:
        from _pytest.assertion import assertstate_key
        from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, _rewrite_test, _write_pyc, get_cache_dir
    except ImportError:
        return      # another pytest's insides: its workers rewrite for themselves, as before
    if config.getoption("assertmode") != "rewrite" or assertstate_key not in config.stash:
        return
    state = config.stash[assertstate_key]
    roots = [config.rootpath / p for p in config.getini("testpaths")] or [config.rootpath / "tests"]
    files = sorted({f for root in roots for pattern in ("test_*.py", "conftest.py") for f in root.rglob(pattern)
                    if "__pycache__" not in f.parts}, key=lambda f: -f.stat().st_size)

    def pyc(f: Path) -> Path:
        return get_cache_dir(f) / (f.name[:-3] + PYC_TAIL)
    todo = [f for f in files if _read_pyc(f, pyc(f)) is None]
    if not todo:
        return
    n = min(len(os.sched_getaffinity(0)), len(todo))
    children = []
    for i in range(1, n):
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                _rewrite(todo[i::n], pyc, state, config, _rewrite_test, _write_pyc)
                status = 0
            finally:
                os._exit(status)      # never pytest's exit handlers: this is a copy of the controller
        children.append(pid)
    _rewrite(todo[0::n], pyc, state, config, _rewrite_test, _write_pyc)
    for pid in children:
        os.waitpid(pid, 0)            # a child that failed left its modules to the workers, as before


def _rewrite(files, pyc, state, config, rewrite_test, write_pyc) -> None:
    for f in files:
        try:
            source_hash, co = rewrite_test(f, config)
        except SyntaxError:
            continue                  # the worker that imports it reports it where the test is collected
        try:
            pyc(f).parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return                    # a read-only checkout: the workers rewrite, as pytest does there
        write_pyc(state, co, source_hash, pyc(f))
