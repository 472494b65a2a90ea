"""ui.admission: answers beyond the running slots wait only while the
estimated wait is short; the rest are refused at once with when to retry."""

from __future__ import annotations

import threading

import pytest

from ui.admission import Admission, Busy


def test_admits_running_plus_waiting_then_refuses_with_a_retry_time():
    a = Admission(running=2, max_wait_s=4.0, first_estimate_s=2.0)
    assert a.max_waiting == 4  # 4 s of waiting, 2 slots, 2 s an answer
    held = [a.enter() for _ in range(6)]
    for h in held:
        h.__enter__()
    with pytest.raises(Busy) as e:
        with a.enter():
            pass
    assert e.value.ahead == 6 and e.value.retry_s >= 1
    assert "ask again in about" in str(e.value)
    for h in held:
        h.__exit__(None, None, None)
    with a.enter() as waiter:  # all gone: admitted, and a slot is free at once
        assert list(waiter) == []


def test_at_least_one_may_wait_and_the_estimate_follows_measured_answers():
    a = Admission(running=1, max_wait_s=1.0, first_estimate_s=15.0)  # the local model
    assert a.max_waiting == 1
    first = a.enter()
    waiter = first.__enter__()
    assert list(waiter) == []  # the slot
    second_in = threading.Event()
    ahead_seen: list[int] = []

    def second() -> None:
        with a.enter() as w:
            for ahead in w:
                ahead_seen.append(ahead)
                second_in.set()

    t = threading.Thread(target=second)
    t.start()
    assert second_in.wait(5)  # waiting, told one question is ahead
    with pytest.raises(Busy):
        with a.enter():
            pass
    first.__exit__(None, None, None)
    t.join(5)
    assert ahead_seen and ahead_seen[0] == 1
    assert a.mean_s < 15.0  # two quick answers pulled the estimate down
