"""The assertions and waits of the integration tests: a Failure says what
was expected and what came; a wait polls what the daemon shows, with a
deadline that fails loudly, instead of sleeping and hoping."""

import time

# How often wait_until() polls.
POLL_S = 0.05


class Failure(AssertionError):
    """A test failure whose message says what was expected and what came."""


def check(condition, message):
    """Fails with message unless condition holds."""
    if not condition:
        raise Failure(message)


def check_equal(actual, expected, what):
    """Fails unless actual == expected, printing both."""
    if actual != expected:
        raise Failure(f"{what}: expected {expected!r}, got {actual!r}")


def wait_until(condition, timeout, what, poll=None):
    """Polls condition() until it is true; returns the seconds that took.
    Fails after `timeout` seconds saying what was awaited: `what` is text,
    or a function that gives it then (to show the state at the deadline).
    For events the daemon shows (an attach, a detach, a count); never sleep
    for them instead."""
    start = time.monotonic()
    while True:
        if condition():
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise Failure(f"{what() if callable(what) else what}: not within {timeout:.1f} s")
        time.sleep(POLL_S if poll is None else poll)


def check_throughout(condition, seconds, what):
    """Fails as soon as condition() is false during the next `seconds`. For
    what must not happen, which no event marks (no scan attaches a process):
    `seconds` is then a span, stated with the reason for its length."""
    deadline = time.monotonic() + seconds
    while True:
        check(condition(), f"{what() if callable(what) else what}: no longer true after "
                           f"{seconds - (deadline - time.monotonic()):.1f} s")
        if time.monotonic() > deadline:
            return
        time.sleep(POLL_S)
