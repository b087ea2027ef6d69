"""The mutation list stays applicable: each listed change still finds its original text exactly once, and names
tests that exist. A product edit that moves a listed line fails here, in CI, with the entry to update, rather
than leaving `make mutate` to report it as stale months later."""

from __future__ import annotations

from tests.mutations.run import ROOT, check, load, present


def test_every_listed_mutation_applies_and_names_existing_tests():
    mutations = load()
    assert len(mutations) >= 40
    problems = {m.id: p for m in mutations if (p := check(m))}
    assert not problems, problems
    missing = {m.id: sorted(set(m.tests) - set(present(m.tests, ROOT))) for m in mutations}
    assert not {k: v for k, v in missing.items() if v}, missing
    kinds = {m.file.split("/")[0] for m in mutations}
    assert {"sql", "pipelines", "prometheus"} <= kinds, kinds
