"""Metrics engines people already run, as sources of the fleet and of one host: Performance Co-Pilot's
pmproxy (pcp.py) and Prometheus with node_exporter (prometheus.py), read over bounded HTTP (http.py) into
the same values the ssh fleet and the window use (host.py, rows.py); a fleet that keeps streaming
(stream.py); moments of the past (replay.py); and what only coremap knows, written for node_exporter's
textfile collector (export.py). No Qt here."""
