import pytest
from hypothesis import given, strategies as st

from app.errors import CpuListError
from app.parse.cpulist import format_cpulist, format_cpumask, parse_cpulist, parse_cpumask


@pytest.mark.parametrize("text,expected", [
    ("0-3,8,10-11\n", (0, 1, 2, 3, 8, 10, 11)),
    ("0,56", (0, 56)),
    ("", ()),
    (" (null)\n", ()),
    ("5", (5,)),
    ("0-15:2/4", (0, 1, 4, 5, 8, 9, 12, 13)),
    ("3,1,1-2", (1, 2, 3)),
])
def test_parse_cpulist(text, expected):
    assert parse_cpulist(text) == expected


@pytest.mark.parametrize("bad", ["2-x", "x", "1,,2", "5-3", "-1", "0-99999999", "1-4:0/2", "1-4:3/2"])
def test_bad_cpulist_names_the_piece(bad):
    with pytest.raises(CpuListError) as e:
        parse_cpulist(bad)
    assert repr(bad) in str(e.value) or bad.split(",")[0] in str(e.value)


def test_cpumask_round_trip_real_shapes():
    assert parse_cpumask("00000000,00000000,00000000,00000003") == (0, 1)
    assert parse_cpumask("ff,00000000") == tuple(range(32, 40))
    assert format_cpumask([0, 1]) == "00000003"
    assert format_cpumask([33]) == "00000002,00000000"
    with pytest.raises(CpuListError):
        parse_cpumask("xyz")


@given(st.sets(st.integers(min_value=0, max_value=4095), max_size=200))
def test_format_then_parse_is_identity(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == tuple(sorted(cpus))
    assert parse_cpumask(format_cpumask(cpus)) == tuple(sorted(cpus))


@given(st.text(max_size=40))
def test_parse_cpulist_never_crashes(text):
    try:
        out = parse_cpulist(text)
    except CpuListError as e:
        assert str(e)
    else:
        assert list(out) == sorted(set(out))
