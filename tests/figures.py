"""The suites' figures (runs, divergences, kill points, scrapes...), gathered into one report printed at the
end of the session, so a CI log or a soak run states what was tried, not only that it passed.

A plain module, not a conftest: `make test` runs the suite in several xdist workers, and the report is the
controller's (tests/conftest.py merges each worker's figures when it finishes).
"""

from __future__ import annotations

from collections import Counter

FIGURES: Counter[str] = Counter()
NOTES: list[str] = []
