"""Another machine, live, over plain OpenSSH: the Qt-free pieces of issue 15.

- hosts.py      `[user@]server[:port]`, checked before it reaches ssh; recent hosts; fleet host files
- protocol.py   the wire: versioned, line-delimited JSON, requests with ids, every line bounded
- codec.py      MachineState (and pins, journal entries) to JSON, as deltas between ticks;
  decode.py     and back, every field validated against its type on the way in
- transport.py  the system `ssh` (BatchMode, one multiplexed connection per host), its failures as
                one line each
- bootstrap.py  what runs first on the server: the installed `coremap agent`, or the agent shipped
                over the same connection into a cache folder (ship.py builds what is shipped)
- agent.py      the server side: the same Sampler, AffinityService and journal as local use
- client.py     the workstation side of one connection; sampler.py, pins.py, probes.py and capture.py
                give the window and the CLI the same interfaces as local sampling, pinning, probing
                and capturing
- fleet.py      many hosts captured in parallel, side by side

Nothing here imports Qt or the probes: the agent's probe runs and CLI runs are handed to it by the
`coremap agent` command (app/cli/agent.py), which sits above the probes.
"""
