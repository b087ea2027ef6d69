"""`python -m tests.mutations` (`make mutate`): break scanwatch on purpose, one listed change at a time, and
run the tests that promise to notice. See tests/mutations/run.py."""

from tests.mutations.run import main

raise SystemExit(main())
