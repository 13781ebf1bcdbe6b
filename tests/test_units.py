"""netsim.units: accepted and rejected quantity strings, messages, and the format/parse round trip."""

import doctest
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netsim import units
from netsim.errors import UnitError, shorten
from netsim.units import format_bandwidth, format_size, format_time, parse_bandwidth, parse_size, parse_time

PARSE = {"size": parse_size, "bandwidth": parse_bandwidth, "time": parse_time}
FORMAT = {"size": format_size, "bandwidth": format_bandwidth, "time": format_time}
EXAMPLE = {"size": "256MiB", "bandwidth": "400Gbps", "time": "2us"}

ACCEPTED = [
    ("size", "256MiB", 268435456.0),
    ("size", "1GB", 1e9),
    ("size", "4KiB", 4096.0),
    ("size", "100B", 100.0),
    ("size", "1.5 GiB", 1.5 * 2**30),
    ("size", "8Kb", 1000.0),
    ("size", "8kb", 1000.0),
    ("size", "1Gb", 125e6),
    ("size", "1e6B", 1e6),
    ("size", "1e3MB", 1e9),
    ("size", "1024", 1024.0),
    ("size", "  2 TiB  ", 2.0 * 2**40),
    ("size", "3PB", 3e15),
    ("size", "1PiB", 2.0**50),
    ("size", "0MiB", 0.0),
    ("size", ".5KB", 500.0),
    ("bandwidth", "400Gbps", 50e9),
    ("bandwidth", "400Gb/s", 50e9),
    ("bandwidth", "25GB/s", 25e9),
    ("bandwidth", "25GBps", 25e9),
    ("bandwidth", "1.6Tbps", 200e9),
    ("bandwidth", "100 Mbps", 12.5e6),
    ("bandwidth", "10GiB/s", 10.0 * 2**30),
    ("bandwidth", "800bps", 100.0),
    ("bandwidth", "1e3MB/s", 1e9),
    ("bandwidth", "0", 0.0),
    ("time", "2us", 2e-6),
    ("time", "2µs", 2e-6),  # U+00B5 MICRO SIGN
    ("time", "2μs", 2e-6),  # U+03BC GREEK SMALL LETTER MU
    ("time", "500ns", 5e-7),
    ("time", "1ms", 1e-3),
    ("time", "1.25ms", 1.25e-3),
    ("time", "1.5s", 1.5),
    ("time", "3ps", 3e-12),
    ("time", "2 us", 2e-6),
    ("time", "1e3ns", 1e-6),
    ("time", "0", 0.0),
]


@pytest.mark.parametrize("kind, text, expected", ACCEPTED, ids=[f"{k}-{t}" for k, t, _ in ACCEPTED])
def test_accepted_strings_give_exact_values(kind, text, expected):
    assert PARSE[kind](text) == expected


REJECTED = [
    ("bandwidth", "400G"),  # prefix without a unit
    ("bandwidth", "400"),  # a bare number string is not a bandwidth
    ("bandwidth", "25gbps"),  # g: giga or a typo? lowercase m/g/t are ambiguous
    ("bandwidth", "10mbps"),
    ("bandwidth", "1tbps"),
    ("bandwidth", "200Gbits"),
    ("bandwidth", "25GB"),  # a size, not a bandwidth
    ("bandwidth", "1kiBps"),
    ("size", "10mb"),
    ("size", "10mB"),
    ("size", "5gib"),
    ("size", "400G"),
    ("size", "5 furlongs"),
    ("size", "1MiB/s"),  # a bandwidth, not a size
    ("size", ""),
    ("size", "   "),
    ("size", "MiB"),
    ("size", "1..5MB"),
    ("size", "1,5MB"),
    ("size", "-1MiB"),
    ("size", -5),
    ("size", -0.5),
    ("size", float("nan")),
    ("size", float("inf")),
    ("size", "nan"),
    ("size", "inf B"),
    ("size", "1e999B"),  # overflows a float
    ("size", "1e308PB"),
    ("size", 10**400),
    ("size", True),
    ("size", None),
    ("size", [1, 2]),
    ("size", {"value": 1}),
    ("time", "2"),  # a bare number string is not a time (seconds? milliseconds?)
    ("time", "1min"),
    ("time", "2 hours"),
    ("time", "1 m"),
    ("time", "3Ms"),
    ("time", "-2us"),
    ("time", ""),
    ("time", False),
    ("time", float("-inf")),
    ("bandwidth", None),
    ("bandwidth", "inf"),
]


@pytest.mark.parametrize("kind, value", REJECTED, ids=[f"{k}-{v!r}" for k, v in REJECTED])
def test_rejected_inputs_raise_unit_error_naming_input_and_accepted_forms(kind, value):
    with pytest.raises(UnitError) as info:
        PARSE[kind](value)
    message = str(info.value)
    # the value as messages show it: its repr, elided past 60 characters (10**400 is 401 digits)
    assert shorten(value) in message
    assert f"as a {kind}" in message
    assert EXAMPLE[kind] in message
    assert isinstance(info.value, ValueError)  # UnitError is also a ValueError, for pydantic


def test_ambiguous_and_negative_inputs_say_why():
    with pytest.raises(UnitError, match="ambiguous prefix 'g'"):
        parse_bandwidth("25gbps")
    with pytest.raises(UnitError, match="ambiguous prefix 'm'"):
        parse_size("10mb")
    with pytest.raises(UnitError, match="unknown unit 'furlongs'"):
        parse_size("5 furlongs")
    with pytest.raises(UnitError, match="missing unit"):
        parse_time("2")
    with pytest.raises(UnitError, match="must not be negative"):
        parse_size(-5)
    with pytest.raises(UnitError, match="must be finite"):
        parse_time(float("nan"))


def test_bandwidth_message_lists_the_accepted_forms():
    with pytest.raises(UnitError) as info:
        parse_bandwidth("400G")
    assert str(info.value).startswith("cannot parse '400G' as a bandwidth")
    for form in ("400Gbps", "400Gb/s", "25GB/s", "25GBps", "b = bits, B = bytes", "Ki Mi Gi Ti"):
        assert form in str(info.value)


FORMATTED = [
    ("size", 268435456, "256MiB"),
    ("size", 1.5 * 2**30, "1.5GiB"),
    ("size", 512, "512B"),
    ("size", 0, "0B"),
    ("bandwidth", 50e9, "400Gbps"),
    ("bandwidth", 200e9, "1.6Tbps"),
    ("bandwidth", 0, "0bps"),
    ("time", 2e-6, "2us"),
    ("time", 5e-7, "500ns"),
    ("time", 1.25e-3, "1.25ms"),
    ("time", 3, "3s"),
    ("time", 3e-12, "3ps"),
    ("time", 0, "0s"),
]


@pytest.mark.parametrize("kind, value, expected", FORMATTED, ids=[e for _, _, e in FORMATTED])
def test_format_gives_short_readable_strings(kind, value, expected):
    assert FORMAT[kind](value) == expected
    assert PARSE[kind](expected) == value


def test_format_keeps_more_than_six_digits_only_when_the_round_trip_needs_them():
    assert format_size(1234567) == "1.17737484MiB"  # 1.17737MiB would be 2.6e-7 off
    assert format_bandwidth(123456789012) == "987.654312Gbps"
    assert format_time(1 / 3) == "333.333333ms"
    assert format_size(1e-20) == "1e-20B" and parse_size(format_size(1e30)) == pytest.approx(1e30, rel=1e-9)


RANGES = {"size": (1e-3, 1e18), "bandwidth": (1e-3, 1e16), "time": (1e-15, 1e6)}


@pytest.mark.parametrize("kind", sorted(RANGES))
@given(data=st.data())
def test_parse_of_format_round_trips(kind, data):
    lo, hi = RANGES[kind]
    x = data.draw(st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False))
    assert PARSE[kind](FORMAT[kind](x)) == pytest.approx(x, rel=1e-9, abs=0)


@pytest.mark.parametrize("kind", sorted(PARSE))
@given(x=st.one_of(st.floats(min_value=0, allow_nan=False, allow_infinity=False),
                   st.integers(min_value=0, max_value=10**30)))
def test_numbers_pass_through_unchanged(kind, x):
    result = PARSE[kind](x)
    assert isinstance(result, float) and result == float(x)


@pytest.mark.parametrize("kind", sorted(PARSE))
@given(x=st.floats(max_value=-1e-300, allow_infinity=False) | st.integers(max_value=-1))
def test_negative_numbers_are_rejected(kind, x):
    with pytest.raises(UnitError, match="must not be negative"):
        PARSE[kind](x)


def test_formatting_non_finite_or_negative_values_does_not_crash():
    assert format_bandwidth(math.inf) == "inf"
    assert format_time(-2e-6) == "-2us"


def test_docstring_examples():
    assert doctest.testmod(units).failed == 0


def test_display_digits():
    from netsim.units import format_bandwidth, format_size, format_time
    assert format_time(0.02114229216, 4) == "21.14ms"
    assert format_bandwidth(101.5728868e9 / 8, 4) == "101.6Gbps"
    assert format_size(1234567, 3) == "1.18MiB"


LONG = ["1" * 65, " " * 1_000_000, "1" * 1_000_000 + "B", "1" + " " * 200_000 + "x", "1." + "9" * 999_999,
        "\n" * 100_000 + "1B"]


@pytest.mark.parametrize("kind", sorted(PARSE))
@pytest.mark.parametrize("text", LONG, ids=["65 digits", "1M spaces", "1M digits", "spaces then x",
                                             "1M decimals", "newlines"])
def test_long_strings_are_refused_at_once_saying_how_long(kind, text):
    import time
    start = time.perf_counter()
    with pytest.raises(UnitError) as info:
        PARSE[kind](text)
    assert time.perf_counter() - start < 0.05
    message = str(info.value)
    assert f"{len(text):,} characters long; a quantity is at most {units.MAX_QUANTITY_CHARS}" in message
    assert f"({len(text) - 60:,} more characters)" in message and len(message) < 500


def test_the_longest_accepted_string_is_the_limit():
    assert parse_size("1" + " " * 61 + "KB") == 1000.0
    with pytest.raises(UnitError, match="65 characters long"):
        parse_size("1" + " " * 62 + "KB")


@given(st.text(max_size=units.MAX_QUANTITY_CHARS))
def test_any_short_text_parses_or_raises_unit_error(text):
    for parse in PARSE.values():
        try:
            result = parse(text)
        except UnitError as exc:
            assert len(str(exc)) < 500
        else:
            assert math.isfinite(result) and result >= 0
