"""Hostile metrics sources (issue 21, "Bad input"): a server on 127.0.0.1 that is not the engine named, that
answers negative or NaN values, 100,000 series, or never finishes its answer. Each is one clear line (or
one row's note), bounded in time and memory, and leaves the other hosts' rows as they are."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.sources.http import JsonClient, SourceError
from app.sources.pcp import Pmproxy
from app.sources.prometheus import Prometheus
from app.sources.stream import FleetStream, prometheus_rounds


def _vector(series: list[tuple[dict, str]]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": m, "value": [1795614000.0, v]} for m, v in series]}}).encode()


class Server:
    """A ThreadingHTTPServer whose answer to each path is given by `routes` (path -> callable(handler))."""

    def __init__(self, routes, host: str = "127.0.0.1"):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _serve(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.body = self.rfile.read(n).decode() if n else ""
                path = self.path.split("?", 1)[0]
                try:
                    routes.get(path, routes.get("*"))(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass            # the client gave up, as it should have

            do_GET = do_POST = _serve

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        # shutdown() waits for serve_forever's next look, every poll_interval (0.5 s by default): half a
        # second of every test's teardown.
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()
        outer.stopping = threading.Event()

    def close(self):
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    servers = []

    def start(routes, host="127.0.0.1"):
        s = Server(routes, host)
        servers.append(s)
        return s
    yield start
    for s in servers:
        s.close()


def send(h, body: bytes, ctype="application/json", status=200):
    h.send_response(status)
    h.send_header("Content-Type", ctype)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def buildinfo(h):
    send(h, json.dumps({"status": "success", "data": {"version": "2.42.0"}}).encode())


def test_a_web_page_is_neither_engine(serve):
    s = serve({"*": lambda h: send(h, b"<html><body>Grafana</body></html>", "text/html")})
    with pytest.raises(SourceError) as e:
        Prometheus(s.url).check()
    assert "answered text/html (HTTP 200), not JSON, so it is not a Prometheus server" in str(e.value)
    with pytest.raises(SourceError, match="so it is not a pmproxy"):
        Pmproxy(s.url).host("node1").facts()
    other = serve({"*": lambda h: send(h, b'{"hello": "world"}')})
    with pytest.raises(SourceError, match="not a Prometheus server"):
        Prometheus(other.url).check()
    with pytest.raises(SourceError, match="not pmproxy's REST API"):
        Pmproxy(other.url).host("node1").facts()


def _fleet_routes(values: dict[str, str]):
    """A Prometheus with hosts a and b, whose per-CPU IRQ rates for `a` are `values` (cpu -> text)."""
    def query(h):
        from urllib.parse import parse_qs
        q = parse_qs(h.body).get("query", [""])[0]
        if q.startswith("max by (instance) (timestamp("):
            send(h, _vector([({"instance": "a"}, "1795614000"), ({"instance": "b"}, "1795614000")]))
        elif "node_cpu_seconds_total" in q:
            send(h, _vector([({"instance": i, "cpu": c, "mode": "idle"}, "0.9") for i in "ab" for c in "01"]))
        elif q.startswith("sum by (instance, cpu) (irate(node_interrupts_total"):
            send(h, _vector([({"instance": "a", "cpu": c}, v) for c, v in values.items()]
                            + [({"instance": "b", "cpu": c}, "100") for c in "01"]))
        else:
            send(h, _vector([]))
    return {"/api/v1/status/buildinfo": buildinfo, "/api/v1/query": query}


def test_negative_nan_and_infinite_values_are_left_out_with_a_note_and_the_other_host_is_untouched(serve):
    s = serve(_fleet_routes({"0": "NaN", "1": "-5", "2": "+Inf", "x": "7"}))
    rows = {r.host: r for b in Prometheus(s.url).rows() for r in b}
    a, b = rows["a"], rows["b"]
    assert a.ok and all(c.irq_per_s == 0 for c in a.state.rates.per_cpu.values())
    assert "a: 4 values that no counter can hold (negative, NaN, infinite or not a number) left out" in a.state.notes
    assert b.ok and [c.irq_per_s for c in b.state.rates.per_cpu.values()] == [100.0, 100.0]
    assert not any("left out" in n for n in b.state.notes)


def test_a_hundred_thousand_series_are_read_in_bounded_memory_or_refused_in_one_line(serve):
    big = _vector([({"instance": "a", "cpu": str(i % 64), "type": f"I{i}"}, "1") for i in range(100_000)])
    s = serve({"/api/v1/query": lambda h: send(h, big)})
    # Memory is bounded by the byte budget (below) and the series cap; within them, every series is read.
    rows = Prometheus(s.url).query("node_interrupts_total")
    assert len(rows) == 100_000
    with pytest.raises(SourceError, match=r"answered 100,000 series, more than coremap reads at once \(50,000\)"):
        Prometheus(s.url, max_series=50_000).query("node_interrupts_total")
    with pytest.raises(SourceError, match="over 1 MiB and was cut off"):
        JsonClient(s.url, what="Prometheus server", max_bytes=1024 ** 2).post("/api/v1/query", {"query": "x"})


def test_a_never_ending_answer_is_cut_off_at_the_deadline_and_a_silent_server_at_the_timeout(serve):
    def drip(h):
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.end_headers()
        h.wfile.write(b'{"status": "success", "data": ')
        while not s.stopping.is_set():
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(0.05)

    def silent(h):
        s.stopping.wait(30)
    s = serve({"/drip": drip, "/silent": silent})
    client = JsonClient(s.url, what="Prometheus server", timeout=0.5, deadline=0.8)
    t0 = time.monotonic()
    with pytest.raises(SourceError, match=r"took over 0\.8 s and was cut off"):
        client.get("/drip")
    assert time.monotonic() - t0 < 0.8 + 0.5 + 5       # its deadline and one read's timeout, not forever
    with pytest.raises(SourceError, match="no answer within 0.5 s"):
        client.get("/silent")


def test_a_fleet_round_that_fails_whole_keeps_every_host_with_when_it_was_last_seen(serve):
    s = serve(_fleet_routes({"0": "10", "1": "20"}))
    stream = FleetStream(prometheus_rounds(Prometheus(s.url, timeout=1.0, deadline=2.0)))
    stream.run_round()
    assert {r.host for r in stream.rows() if r.ok} == {"a", "b"}
    s.close()                                            # the server goes away
    stream.run_round()
    assert stream.error.startswith(f"Prometheus server at {s.url} cannot be reached")
    for r in stream.rows():
        assert r.state is not None and r.stale.startswith("no answer since ")


def test_the_token_comes_from_the_config_goes_to_its_server_only_and_is_never_printed(serve, tmp_path):
    from app.sources.http import auth_for
    token = "coremap-test-token-5e1d"
    seen = []

    def guarded(h):
        seen.append(h.headers.get("Authorization"))
        if h.headers.get("Authorization") != f"Bearer {token}":
            send(h, b'{"status": "error", "error": "unauthorized"}', status=401)
        else:
            buildinfo(h)
    s = serve({"*": guarded})
    (tmp_path / "token").write_text(token + "\n")
    config = tmp_path / "sources.ini"
    config.write_text(f"[{s.url}]\nbearer_token_file = {tmp_path / 'token'}\n[http://elsewhere:9090]\n"
                      f"bearer_token_file = {tmp_path / 'token'}\n")
    auth = auth_for(s.url + "/", str(config))
    assert Prometheus(s.url, auth=auth).check() == "2.42.0"
    assert token not in repr(auth)
    with pytest.raises(SourceError) as e:
        Prometheus(s.url, auth=auth_for("http://127.0.0.1:1", str(config))).check()   # no section: no token
    assert "refused coremap (HTTP 401); give a bearer_token_file" in str(e.value) and token not in str(e.value)
    assert seen == [f"Bearer {token}", None]
    with pytest.raises(SourceError, match="no such file"):
        auth_for(s.url, str(tmp_path / "missing.ini"))
    (tmp_path / "token").write_text("two\nlines\n")
    with pytest.raises(SourceError, match="one token on one line"):
        auth_for(s.url, str(config))
