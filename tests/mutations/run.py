"""The mutation habit: each change of `mutations.yml` is applied to a fresh copy of the tree (the files git
tracks, and new ones not yet committed), the tests it names run there, and the change is *killed* when they
fail, *survived* when they pass. The score is killed / (killed + survived).

Why a copy and not the checkout: the checkout stays untouched while the runs go on (two at a time at most),
and a run that is stopped midway leaves nothing broken behind. The copy is imported first
(`PYTHONPATH`), so the tests, `python -m pipelines.cli` subprocesses and the SQL files all come from it.

A listed change whose original text is not found exactly once is an error of the list (the product moved on):
it is reported as `stale`, never as killed. So is a test selection that errors before running (pytest's
exit codes 2 to 5), which says nothing about the change.

    python -m tests.mutations                      # every mutation, two at a time
    python -m tests.mutations --only rules- -j 1   # those whose id starts with `rules-`
    python -m tests.mutations --baseline           # first check each selection passes on the unchanged tree
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
LIST = Path(__file__).with_name("mutations.yml")
TIMEOUT = 900.0


@dataclass(frozen=True)
class Mutation:
    id: str
    file: str
    original: str
    mutated: str
    tests: tuple[str, ...]
    why: str = ""
    kept: str = ""  # a survivor accepted, and the reason
    also: tuple[tuple[str, str, str], ...] = ()  # more (file, original, mutated): one change kept in two copies

    def edits(self) -> list[tuple[str, str, str]]:
        return [(self.file, self.original, self.mutated), *self.also]


@dataclass
class Outcome:
    mutation: Mutation
    status: str  # killed | survived | stale | timeout (a hang or a crash: counted as killed)
    seconds: float
    detail: str = ""
    failed: list[str] = field(default_factory=list)


def load(path: Path = LIST) -> list[Mutation]:
    entries = yaml.safe_load(path.read_text())["mutations"]
    out = [Mutation(id=e["id"], file=e["file"], original=e["original"], mutated=e["mutated"],
                    tests=tuple(e["tests"]), why=e.get("why", ""), kept=e.get("kept", ""),
                    also=tuple((a["file"], a["original"], a["mutated"]) for a in e.get("also", [])))
           for e in entries]
    ids = [m.id for m in out]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        raise SystemExit(f"{path}: ids listed twice: {sorted(dupes)}")
    return out


def tree_files(root: Path = ROOT) -> list[str]:
    """What a copy holds: tracked files and new, not ignored ones (a test being written counts)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                            capture_output=True, check=True).stdout.decode()
    return [p for p in listed.split("\0") if p and (root / p).is_file()]


def copy_tree(dest: Path, files: list[str], root: Path = ROOT) -> None:
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)


def check(mutation: Mutation, root: Path = ROOT) -> str | None:
    """Why the mutation cannot be applied to `root` (None when it can): each original text occurs exactly once."""
    for file, original, mutated in mutation.edits():
        path = root / file
        if not path.is_file():
            return f"{file} does not exist"
        count = path.read_text().count(original)
        if count != 1:
            return f"original text found {count} times in {file}"
        if original == mutated:
            return f"mutated text equals the original in {file}"
    return None


# A mutant that pages for ever or inflates without end must not take the machine with it: its tests run under
# an address-space limit, and each test under pytest-timeout's limit.
MEMORY_LIMIT = 6 * 1024**3
TEST_TIMEOUT = 300


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _pytest(copy: Path, tests: tuple[str, ...], timeout: float) -> tuple[int | None, str]:
    env = {**os.environ, "PYTHONPATH": str(copy), "SCANWATCH_REQUIRE_PROMETHEUS": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("SCANWATCH_SOAK", None)
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly",
               "--no-header", "-rf", f"--timeout={TEST_TIMEOUT}", *tests]
    proc = subprocess.Popen(command, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, preexec_fn=_limits)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        return None, out
    return proc.returncode, out


def present(tests: tuple[str, ...], root: Path) -> tuple[str, ...]:
    """The listed tests whose file exists under `root`."""
    return tuple(t for t in tests if (root / t.split("::", 1)[0]).exists())


def run_one(mutation: Mutation, base: Path, files: list[str], *, apply: bool = True,
            timeout: float = TIMEOUT) -> Outcome:
    """`mutation` applied to a copy of `base` (the tree as it was when the run began), its tests run there."""
    started = time.monotonic()
    problem = check(mutation, base)
    if problem:
        return Outcome(mutation, "stale", 0.0, problem)
    tests = present(mutation.tests, base)
    if not tests:
        return Outcome(mutation, "stale", 0.0, "none of its tests exists")
    with tempfile.TemporaryDirectory(prefix="scanwatch-mutant-") as tmp:
        copy = Path(tmp) / "tree"
        copy_tree(copy, files, base)
        if apply:
            for file, original, mutated in mutation.edits():
                path = copy / file
                path.write_text(path.read_text().replace(original, mutated, 1))
        code, out = _pytest(copy, tests, timeout)
    seconds = time.monotonic() - started
    failed = [line.split(" ", 1)[1].split(" - ")[0] for line in out.splitlines() if line.startswith("FAILED ")]
    if code is None:
        return Outcome(mutation, "timeout", seconds, "no verdict within the time allowed")
    if code == 0:
        return Outcome(mutation, "survived", seconds)
    if code == 1:
        return Outcome(mutation, "killed", seconds, failed=failed)
    if code < 0 or "Timeout" in out[-3000:] or "MemoryError" in out[-3000:]:
        # Killed by a signal, out of memory or past a test's time: the change made the tests hang or crash.
        return Outcome(mutation, "timeout", seconds, f"pytest exit {code}: the tests hung or ran out of memory")
    return Outcome(mutation, "stale", seconds, f"pytest exit {code}: " + "\n".join(out.splitlines()[-8:]))


def score(outcomes: list[Outcome]) -> tuple[int, int, float]:
    killed = sum(o.status in ("killed", "timeout") for o in outcomes)
    survived = sum(o.status == "survived" for o in outcomes)
    judged = killed + survived
    return killed, survived, (killed / judged if judged else 0.0)


def report(outcomes: list[Outcome]) -> str:
    lines = []
    for o in sorted(outcomes, key=lambda o: o.mutation.id):
        note = ""
        if o.status == "killed" and o.failed:
            note = f" by {o.failed[0]}"
        elif o.status == "survived" and o.mutation.kept:
            note = f" (kept: {o.mutation.kept})"
        elif o.detail:
            note = f" ({o.detail.splitlines()[0][:160]})"
        lines.append(f"{o.status:<9} {o.seconds:6.0f} s  {o.mutation.id}{note}")
    killed, survived, ratio = score(outcomes)
    stale = sum(o.status == "stale" for o in outcomes)
    lines.append(f"score: {killed} killed of {killed + survived} ({ratio:.0%}); {survived} survived; "
                 f"{stale} not judged (stale list or test error)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutations", description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", type=Path, default=LIST, help="the mutations file (default: %(default)s)")
    parser.add_argument("--only", action="append", default=[],
                        help="run the mutations whose id starts with this (repeatable)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="mutations run at once (default 2; at most 2)")
    parser.add_argument("--baseline", action="store_true",
                        help="run each selection on the unchanged tree first: a failing one is not a kill")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds per mutation")
    parser.add_argument("--json", type=Path, help="also write the outcomes here")
    parser.add_argument("--check", action="store_true", help="only check that every mutation still applies")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the tree to mutate (default: this checkout); e.g. an older commit's `git archive`, "
                        "to score its tests against today's list")
    args = parser.parse_args(argv)
    mutations = [m for m in load(args.list) if not args.only or m.id.startswith(tuple(args.only))]
    if args.check:
        problems = {m.id: p for m in mutations if (p := check(m, args.root))}
        for mid, p in problems.items():
            print(f"stale {mid}: {p}")
        print(f"{len(mutations) - len(problems)} of {len(mutations)} mutations apply")
        return 1 if problems else 0
    files = tree_files(args.root) if (args.root / ".git").exists() else [
        str(p.relative_to(args.root)) for p in args.root.rglob("*") if p.is_file()]
    jobs = max(1, min(args.jobs, 2))
    with tempfile.TemporaryDirectory(prefix="scanwatch-mutation-base-") as tmp:
        base = Path(tmp)
        copy_tree(base, files, args.root)  # the checkout may change while the run goes on; the run does not
        return _run(args, mutations, base, files, jobs)


def _run(args: argparse.Namespace, mutations: list[Mutation], base: Path, files: list[str], jobs: int) -> int:
    if args.baseline:
        selections = {m.tests: m for m in mutations}
        with ThreadPoolExecutor(jobs) as pool:
            checked = list(pool.map(lambda m: run_one(m, base, files, apply=False, timeout=args.timeout),
                                    selections.values()))
        broken = [o for o in checked if o.status != "survived"]
        for o in broken:
            print(f"baseline fails for {' '.join(o.mutation.tests)}: {o.status} {o.failed or o.detail[:300]}")
        if broken:
            return 2
        print(f"baseline: the {len(checked)} test selections pass on the unchanged tree", flush=True)
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(jobs) as pool:
        for outcome in pool.map(lambda m: run_one(m, base, files, timeout=args.timeout), mutations):
            print(f"{outcome.status:<9} {outcome.seconds:6.0f} s  {outcome.mutation.id}", flush=True)
            outcomes.append(outcome)
    print(report(outcomes), flush=True)
    if args.json:
        args.json.write_text(json.dumps([{"id": o.mutation.id, "status": o.status, "seconds": round(o.seconds),
                                          "failed": o.failed, "detail": o.detail[:500]} for o in outcomes],
                                        indent=1))
    return 0
