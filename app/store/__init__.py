"""What coremap keeps and hands over: sessions, captures of a machine (the tarball), stored probe
results, reports, and the folders they live in."""
