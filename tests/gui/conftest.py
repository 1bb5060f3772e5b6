"""GUI tests: offscreen Qt (tests/conftest.py sets QT_QPA_PLATFORM) and no Qt warning tolerated.

pytest-qt's qt_log_level_fail (pyproject) fails a test on a warning it captured; this handler is a
second net that also catches messages emitted while no pytest-qt capture is active (fixtures,
teardown), records every QtWarningMsg / QtCriticalMsg / QtFatalMsg and fails the test in teardown.
"""
from __future__ import annotations

import gc
import re

import pytest
from PySide6.QtCore import QtMsgType, qInstallMessageHandler

_BAD = (QtMsgType.QtWarningMsg, QtMsgType.QtCriticalMsg, QtMsgType.QtFatalMsg)


@pytest.fixture(scope="module", autouse=True)
def freeze_what_lived_before_the_module():
    """What is alive when a GUI module starts (Qt, the modules imported, the session's fixtures and caches,
    the parsed product modules of the hostile tests) is moved out of the collector's sight (gc.freeze):
    the collections at each test's end then look only at what this module made. A worker's heap grows
    with every file it runs, and a full collection of it took 0.6-0.9 s at every GUI test's end late in
    a run (35 s of a non-live run's teardowns, issue 31). What was alive at a module's start lives on (a
    session's objects); the module's own objects, its module fixtures' windows included, are collected
    at its end, when those fixtures are gone."""
    gc.collect()
    gc.freeze()
    yield
    gc.collect()


@pytest.fixture(autouse=True)
def collect_qt_garbage_while_no_worker_runs(freeze_what_lived_before_the_module):
    """Collect each test's dead windows, sampler threads and models at its end, when every sampler
    thread has been stopped (qtbot closes its widgets first: this autouse fixture is set up before
    qtbot and so torn down after it). Left to chance, a collection of PySide wrappers ran in the UI
    thread while the next test's sampler worker ran Python, and crashed or hung the interpreter
    (PySide6 6.11, Python 3.11: "Fatal Python error: Segmentation fault ... Garbage-collecting")."""
    yield
    gc.collect()


@pytest.fixture(autouse=True)
def fail_on_qt_warnings(request):
    recorded: list[str] = []

    previous = None

    # A test that pops up a menu says which of the offscreen platform's messages it expects
    # (pytest-qt's qt_log_ignore marker, which its own capture honours too).
    ignored = [re.compile(p) for m in request.node.iter_markers("qt_log_ignore") for p in m.args]

    def handler(mode, context, message):
        if mode in _BAD and not any(p.search(message) for p in ignored):
            recorded.append(f"{mode.name}: {message} ({context.file}:{context.line})")
        if previous is not None:
            previous(mode, context, message)      # pytest-qt's own capture still sees it

    previous = qInstallMessageHandler(handler)
    yield recorded
    # Let queued deletions and events run so warnings they raise are seen in this test.
    from PySide6.QtWidgets import QApplication
    app = QApplication.instance()
    if app is not None:
        app.processEvents()
    qInstallMessageHandler(previous)
    if recorded:
        pytest.fail("Qt warnings during the test:\n" + "\n".join(recorded))
