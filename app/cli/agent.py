"""`coremap agent`: serve coremap's protocol on stdin and stdout. `coremap --host` starts it over ssh on
the server (app/remote/bootstrap.py); it is not for people to type.

The agent and the process around it are app/remote/agent.py and app/remote/server.py (sampling,
pins, the journal, probe runs and `coremap` commands run there); this command only starts them.
"""
from __future__ import annotations

import os


def register(subparsers) -> None:
    # No help=: argparse then leaves it out of `coremap --help`'s list, and the manual and completion,
    # which list what help lists, leave it out too (app/cli/common.py hidden_commands); it still runs.
    p = subparsers.add_parser(
        "agent",
        description="Serve coremap's line-delimited JSON protocol on stdin and stdout for a coremap "
                    "on another machine (`coremap --host`, which starts this over ssh). Not for people.")
    p.set_defaults(func=run)


def run(args) -> int:
    # Imported here, not at the top: every `coremap` run imports this module to build its parser.
    from app.remote.bootstrap import SHIPPED_ENV
    from app.remote.server import serve
    return serve(os.environ.get(SHIPPED_ENV) or None)
