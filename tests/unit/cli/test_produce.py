"""``strata produce``'s pure parts: splitting input lines, headers and the rate limiter."""

from __future__ import annotations

import io

import pytest
import typer

from strata.cli.produce import InputRecord, RateLimiter, parse_headers, read_lines, split_record


def test_read_lines_strips_only_the_newline() -> None:
    stream = io.BytesIO(b"a\n\nb c\r\n  d  \nlast")
    assert list(read_lines(stream)) == [b"a", b"", b"b c\r", b"  d  ", b"last"]
    assert list(read_lines(io.BytesIO(b""))) == []


@pytest.mark.parametrize(
    ("line", "separator", "expected"),
    [
        (b"k:v", b":", InputRecord(b"k", b"v")),
        (b"k:v:w", b":", InputRecord(b"k", b"v:w")),
        (b":v", b":", InputRecord(b"", b"v")),
        (b"k:", b":", InputRecord(b"k", b"")),
        (b"no separator", b":", InputRecord(None, b"no separator")),
        (b"k::v", b"::", InputRecord(b"k", b"v")),
        (b"k:v", None, InputRecord(None, b"k:v")),
    ],
)
def test_split_record(line: bytes, separator: bytes | None, expected: InputRecord) -> None:
    assert split_record(line, separator) == expected


def test_parse_headers_keeps_order_duplicates_and_equals_in_values() -> None:
    assert parse_headers(["a=1", "b=x=y", "a=", "a=2"]) == [
        ("a", b"1"), ("b", b"x=y"), ("a", b""), ("a", b"2")
    ]


@pytest.mark.parametrize("bad", ["novalue", "=v"])
def test_parse_headers_rejects(bad: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_headers([bad])


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_limiter_follows_an_absolute_schedule() -> None:
    clock = FakeClock()
    limiter = RateLimiter(4.0, clock)  # one record every 0.25 s
    assert limiter.wait_time() == 0.0
    limiter.take()  # record 0 at t=100 starts the schedule
    assert limiter.wait_time() == pytest.approx(0.25)
    clock.now = 100.1
    assert limiter.wait_time() == pytest.approx(0.15)
    clock.now = 100.25
    limiter.take()  # record 1, on time
    clock.now = 101.0  # late: records 2 and 3 are already due, none waits
    assert limiter.wait_time() == 0.0
    limiter.take()
    assert limiter.wait_time() == 0.0
    limiter.take()
    assert limiter.wait_time() == pytest.approx(0.0)  # record 4 is due at 101.0
    limiter.take()
    assert limiter.wait_time() == pytest.approx(0.25)


def test_rate_limiter_needs_a_positive_rate() -> None:
    with pytest.raises(ValueError):
        RateLimiter(0)
