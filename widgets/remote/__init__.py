"""File → Connect…: another machine over ssh in the window (app/remote/ holds everything that is not Qt)."""
