"""The top layer: the `coremap` command line. One module per subcommand, each with
`register(subparsers)` setting `func`; `main.py` builds the parser and opens the window when no
subcommand is given. Only this layer may import widgets/ (lazily, when the window or a picture is asked
for) and probes/ — see the import-linter contracts in pyproject.toml."""
