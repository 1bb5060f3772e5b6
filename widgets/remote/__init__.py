"""The window on a machine reached over ssh: the sampler thread that ticks through its agent, and
File → Connect… (app/remote/ holds everything that is not Qt)."""
