"""`coremap fleet`'s window: small multiples of every host's grid on one colour scale, and the table of their
facts with what sets a machine apart highlighted (app/remote/fleet.py captures them over ssh; app/sources/
streams them from PCP or Prometheus, window.py shows them as they answer). opener.py opens one of its hosts
in the main window (through open_host, as the command line does)."""
