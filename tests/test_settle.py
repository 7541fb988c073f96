"""``--settle``: waiting for a quiet machine before a notebook starts (pure logic, a fake clock)."""

from __future__ import annotations

import pytest

from benchlib.cli import build_parser
from benchlib.core.errors import ParameterError
from benchlib.run.settle import wait_for_quiet


class _Clock:
    """A monotonic clock that moves only when slept on; the load falls by ``step`` per poll."""

    def __init__(self, loads: list[float]) -> None:
        self.t = 0.0
        self.loads = loads
        self.reads = 0

    def read(self) -> float:
        x = self.loads[min(self.reads, len(self.loads) - 1)]
        self.reads += 1
        return x

    def sleep(self, s: float) -> None:
        self.t += s


def test_it_waits_until_the_load_average_is_below_the_threshold() -> None:
    c = _Clock([1.2, 0.8, 0.5, 0.29, 0.1])
    got = wait_for_quiet(0.3, max_wait_s=600, poll_s=5, read=c.read, sleep=c.sleep, clock=lambda: c.t)
    assert got.quiet and got.loadavg == 0.29 and got.waited_s == 15.0
    assert "0.29 < 0.3 after 15 s: starting" in got.line()


def test_a_machine_that_stays_busy_starts_anyway_after_the_longest_wait_and_says_so() -> None:
    c = _Clock([2.0])
    got = wait_for_quiet(0.3, max_wait_s=12, poll_s=5, read=c.read, sleep=c.sleep, clock=lambda: c.t)
    assert not got.quiet and got.waited_s == 12.0 and got.loadavg == 2.0
    assert "still 2.00 (>= 0.3) after 12 s: starting anyway" in got.line()


def test_a_quiet_machine_does_not_wait() -> None:
    c = _Clock([0.05])
    got = wait_for_quiet(0.3, read=c.read, sleep=c.sleep, clock=lambda: c.t)
    assert got.quiet and got.waited_s == 0.0 and c.reads == 1


@pytest.mark.parametrize(("threshold", "wait", "needle"), [(0.0, 10.0, "--settle 0.0"), (-1.0, 10.0, "--settle -1.0"),
                                                           (0.3, -1.0, "--settle-max -1.0")])
def test_bad_settings_are_refused_naming_the_option(threshold: float, wait: float, needle: str) -> None:
    with pytest.raises(ParameterError, match=needle):
        wait_for_quiet(threshold, max_wait_s=wait, read=lambda: 0.0)


def test_run_and_report_take_the_options_and_hand_them_to_the_kernels_through_the_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from benchlib.core import settings
    from benchlib.run.settle import settle_env

    monkeypatch.delenv("BENCHLIB_SETTLE", raising=False)
    monkeypatch.setenv("BENCHLIB_SETTLE_MAX_S", "5")
    for cmd in ("run", "report"):
        a = build_parser().parse_args([cmd, "00_quickstart", "--settle", "0.3", "--settle-max", "120"])
        assert a.settle == 0.3 and a.settle_max == 120.0
        with settle_env(a.settle, a.settle_max):
            assert settings.SETTLE.get() == 0.3 and settings.SETTLE_MAX_S.value() == 120.0
        assert settings.SETTLE.get() is None and settings.SETTLE_MAX_S.value() == 5.0  # as before
    with settle_env(None, 600.0):
        assert settings.SETTLE.get() is None


def test_the_runner_waits_before_its_first_trial_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchlib.run import settle

    seen: list[str] = []
    calls: list[tuple[float, float]] = []

    def fake_wait(threshold: float, *, max_wait_s: float) -> settle.Settled:
        calls.append((threshold, max_wait_s))
        return settle.Settled(threshold, 0.12, 42.0, True)

    monkeypatch.setattr(settle, "wait_for_quiet", fake_wait)
    monkeypatch.delenv("BENCHLIB_SETTLE", raising=False)
    assert settle.settle_as_asked(seen.append) is None
    assert not calls and not seen  # unset: no wait
    monkeypatch.setenv("BENCHLIB_SETTLE", "0.3")
    monkeypatch.setenv("BENCHLIB_SETTLE_MAX_S", "90")
    got = settle.settle_as_asked(seen.append)
    assert calls == [(0.3, 90.0)] and got == settle.Settled(0.3, 0.12, 42.0, True)
    assert seen == ["settle: load average 0.12 < 0.3 after 42 s: starting"]
