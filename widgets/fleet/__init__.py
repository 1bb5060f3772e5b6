"""`coremap fleet`'s window: small multiples of every host's grid on one colour scale, and the table
of their facts with what sets a machine apart highlighted (app/remote/fleet.py captures them)."""
