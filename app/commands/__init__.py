"""One module per `coremap` subcommand; each defines `register(subparsers)` and sets `func`."""
