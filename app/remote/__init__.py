"""Another machine, live, over plain OpenSSH: the Qt-free pieces of issue 15.

- hosts.py      `[user@]server[:port]`, checked before it reaches ssh; recent hosts; fleet host files
- protocol.py   the wire: versioned, line-delimited JSON, requests with ids, every line bounded
- codec.py      MachineState (and pins, journal entries) to JSON, as deltas between ticks;
  decode.py     and back, each object checked against its typed definition (msgspec) on the way in
- transport.py  the system `ssh` (BatchMode, one multiplexed connection per host), its failures as
                one line each
- bootstrap.py  what runs first on the server: the installed `coremap agent`, or the agent shipped
                over the same connection into a cache folder (ship.py builds what is shipped)
- agent.py      the server side: the same Sampler, AffinityService and journal as local use
- server.py     the agent's process there (what `coremap agent` runs), and its ops that start programs:
                a probe (probes/runner.py's ProbeRun) and a `coremap` command
- client.py     the workstation side of one connection, and the Link a RemoteHost (host.py: the Host of
                app/host.py) owns; sampler.py, pins.py, probe_runs.py and capture.py go over it with
                the same interfaces as local sampling, pinning, probing and capturing: RemoteSampler
                is a MachineSource (app/sampling/sources.py), RemoteProbeRun a RunningProbe (probes/runner.py)
- fleet.py      many hosts captured in parallel, side by side

Nothing here imports Qt or the CLI. This layer sits above probes/ (it runs them on the server and
hands their lines to the window here) and below widgets/ and app/cli/.
"""
