"""Shared test setup: fixture machines (tests/machines.py) and the offscreen Qt platform."""
import os

# GUI tests render offscreen; set before any Qt import (CI has no display).
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Never let a test touch the user's real state (pin journal, autosave).
os.environ.setdefault("COREMAP_REPORTS_DIR", os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"coremap-test-reports-{os.getpid()}"))
os.environ.setdefault("COREMAP_STATE_DIR", os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"coremap-test-state-{os.getpid()}"))
