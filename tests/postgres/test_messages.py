"""A server's message with its position lines ends in a bare `^`: the line scanwatch prints is the message's
cause, never the caret (a lock-timeout line once ended in `^`)."""

from __future__ import annotations

from pipelines.core.history_location import HistoryLocation
from pipelines.storage.destinations.impl.postgres.errors import describe_failure, driver_reason

LOCATION = HistoryLocation.parse("postgresql://reader:s3cret-pass@127.0.0.1:5432/scanwatch")
POSITIONED = Exception("canceling statement due to lock timeout\nLINE 1: SELECT * FROM issues FOR UPDATE\n"
                       "                      ^")


def test_the_reason_is_the_cause_not_the_caret() -> None:
    assert driver_reason(POSITIONED, LOCATION) == "canceling statement due to lock timeout"


def test_a_failure_line_ends_in_words_and_shows_no_password() -> None:
    line = describe_failure(POSITIONED, LOCATION)
    assert not line.rstrip().endswith("^") and "canceling statement due to lock timeout" in line
    assert "s3cret-pass" not in line
