"""Arguments of the doors opened for metrics sources (issue 32, "Tracebacks instead of one line"): each
kind has one parser, and what it refuses is one line and exit status 2 before any work, never a traceback."""
from __future__ import annotations

import pytest

from app.parse.url import UrlError, parse_url
from tests.hostile.conftest import run_cli

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


@pytest.mark.parametrize("argv", [["fleet", "--json", "--prometheus"], ["fleet", "--json", "--pcp"],
                                  ["--host", "a", "--prometheus"], ["--host", "a", "--pcp"]])
@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/", "http://[::1", "http://127.0.0.1:abc/",
                                 "http://ev\x1b[31mil/", "http://" + "a" * 64 + ".example/"])
def test_a_bad_url_argument_is_one_line_and_exit_2(argv, url):
    p = run_cli(*argv, url, "node1", timeout=30)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1 and "\x1b" not in p.stderr
    assert "URL" in p.stderr


@pytest.mark.parametrize("url, base", [("http://127.0.0.1:9090/", "http://127.0.0.1:9090"),
                                       ("HTTPS://Prom.Example:443/api/", "https://prom.example/api"),
                                       ("http://[::1]:9090", "http://[::1]:9090"),
                                       ("http://bücher.example:80", "http://xn--bcher-kva.example")])
def test_a_good_url_is_read_as_one_base(url, base):
    assert parse_url(url, what="--prometheus").base == base
