"""A contract-faithful fake of the Security Scanning Service (API version 2026-10-13).

The real service cannot be reached from development machines or CI, so the demo, every test and every
benchmark run against this package. Its fidelity bounds scanwatch's: a client that only ever met a
lenient fake breaks on the real service, so the simulator is strict where the contract is strict.
"""

SERVICE_VERSION = "2026-10-13"
