"""Native timing loops (C, in probes._native), one module per probe, and the JSON-lines runner. No Qt."""
