"""`coremap fleet`'s window: small multiples of every host's grid on one colour scale, and the table of their
facts with what sets a machine apart highlighted (app/remote/fleet.py captures them over ssh; app/sources/
streams them from PCP or Prometheus, window.py shows them as they answer). live.py opens one host of a
metrics engine in the main window; replay.py adds a time slider over a past (app/sources/replay.py)."""
