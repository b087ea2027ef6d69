"""scanwatch benchmarks: every figure of the performance issue, reproducible with `python -m benchmarks`.

Each module measures one family of figures against the bundled simulator and returns `Figure`s; the
runner (`__main__`) prints them as a table and writes them as JSON under `benchmarks/results/`.
"""
