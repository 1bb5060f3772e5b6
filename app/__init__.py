"""coremap's model of a Linux machine: topology, interrupts, threads, and what can be done to them.

No Qt here, ever (tests/unit/test_no_qt.py enforces it).
"""
__version__ = "0.1.0"
