"""Native timing loops (C, in probes._native), one module per probe, and the JSON-lines runner. No Qt."""

# The environment variable through which ProbeRun (probes/runner.py) tells a probe child its parent's pid,
# for the child's die_with_parent (probes/__main__.py). Here, not in the runner: a child read it from there
# at the cost of importing the runner's subprocess, threads and JSON reader before its loop.
PARENT_ENV = "COREMAP_PROBE_PARENT"
