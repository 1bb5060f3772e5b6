"""Arguments of the doors opened for metrics sources (issue 32, "Tracebacks instead of one line"): each
kind has one parser, and what it refuses is one line and exit status 2 before any work, never a traceback."""
from __future__ import annotations

import pytest

from app.parse.url import UrlError, parse_url
from app.sources.replay import ReplayError, Timeline, parse_at
from tests.hostile.conftest import run_cli, run_main

BAD_URLS = ["http://127.0.0.1:99999/", "http://[::1", "http://127.0.0.1:abc/", "http://ev\x1b]0;x\x07il:9090/",
            "http://" + "a" * 64 + ".example/", "http://" + "é" * 70 + ".example/", "http://-x-.example/",
            "http://u:secret@127.0.0.1:9090/", "ftp://127.0.0.1/", "http://:9090/", "http://127.0.0.1:0/",
            "http://127.0.0.1:9090/?q=1", "http://[::1]x:90/", "http://" + "a." * 200 + "example/", ""]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_url_is_checked_whole_by_one_parser(url):
    with pytest.raises(UrlError) as e:
        parse_url(url, what="--prometheus")
    line = str(e.value)
    assert line.startswith("--prometheus ") and "\n" not in line and "\x1b" not in line and "secret" not in line


CLI_URLS = ["http://ev\x1b[31mil/", "http://127.0.0.1:99999/", "http://[::1", "http://127.0.0.1:abc/",
            "http://" + "a" * 64 + ".example/"]


@pytest.mark.parametrize("argv", [["fleet", "--json", "--prometheus"], ["fleet", "--json", "--pcp"],
                                  ["--host", "a", "--prometheus"], ["--host", "a", "--pcp"]])
@pytest.mark.parametrize("url", CLI_URLS)
def test_a_bad_url_argument_is_one_line_and_exit_2(capsys, argv, url):
    # Each door's first URL (the escape) as a child; the other four in this process (run_main).
    p = run_cli(*argv, url, "node1", timeout=30) if url == CLI_URLS[0] else run_main(capsys, *argv, url, "node1")
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1 and "\x1b" not in p.stderr
    assert "URL" in p.stderr


@pytest.mark.parametrize("url, base", [("http://127.0.0.1:9090/", "http://127.0.0.1:9090"),
                                       ("HTTPS://Prom.Example:443/api/", "https://prom.example/api"),
                                       ("http://[::1]:9090", "http://[::1]:9090"),
                                       ("http://bücher.example:80", "http://xn--bcher-kva.example")])
def test_a_good_url_is_read_as_one_base(url, base):
    assert parse_url(url, what="--prometheus").base == base


class _Wall(Timeline):
    """A wall-clock timeline of two moments: what --at is read against for the engines and archives."""
    wall = True
    times = [1795614000.0, 1795614060.0]


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-12:00", "1969-12-31T23:59:59",
                                  "0001-01-01T00:00:00", "9999-12-31T23:59:59.999999-23:59"])
def test_at_out_of_the_years_1970_to_9999_is_one_line(text):
    with pytest.raises(ReplayError) as e:
        parse_at(text, _Wall())
    assert str(e.value) == f"--at {text!r}: out of range; give a time from 1970 to 9999"


@pytest.mark.parametrize("text, want", [("2026-11-25T13:40:00+00:00", 1795614000.0), ("end", 1795614060.0),
                                        ("-30", 1795614030.0), ("1970-01-01T00:00:00+00:00", 0.0)])
def test_at_in_range_is_read(text, want):
    assert parse_at(text, _Wall()) == want


def test_export_with_a_400_digit_jitter_count_is_a_note_not_a_traceback(tmp_path):
    result = tmp_path / "jitter.json"
    result.write_text('{"probe": "jitter", "cpu": 0, "sampled_seconds": 0.5, "gaps": {"from_ns": 1000, "count": %s}}'
                      % ("9" * 400))
    out = tmp_path / "x.prom"
    p = run_cli("export", "--textfile", out, "--jitter", result, timeout=60,
                env={"COREMAP_STATE_DIR": str(tmp_path / "state")})
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-600:]
    assert "has no gap count and sampled time; left out" in p.stderr
    assert "coremap_jitter_gaps_per_second{" not in out.read_text()
