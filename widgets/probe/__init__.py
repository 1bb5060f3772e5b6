"""The probe panel and its rooms: form.py (the fields and the ProbeSpec they describe), controller.py
(runs the jobs), runs.py (the runs and their list), drop.py (CPUs dropped from the grid), tabs.py and
the plot modules (histogram, percentiles, sweep bars, c2c matrix, gap attribution; axes.py for their
axes), run_table.py (percentiles per run), panel.py (ProbePanel, which composes them)."""
