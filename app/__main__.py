"""`python -m app`: the same as the `coremap` command (app/cli/main.py)."""
import sys

from app.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
