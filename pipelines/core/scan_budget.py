"""Which scan a target can take, and how many the account can pay for, before anything is spent.

The contract charges a quick scan or an audit to its own period quota, then to the shared pack credits
(`pack_credits.scans`) once that quota is used up; a repository analysis costs nothing. An audit the service
turns into a quick scan (`audit_fallback`, the site's proof lapsed) is charged as a quick scan, so an audit
request needs room in both quotas to keep the reserve people count on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

QUOTA_OF_KIND: dict[str, str] = {"quick": "quick_scans", "audit": "audits"}


def fitting_kind(target: dict[str, Any], wanted: str, features: dict[str, Any]) -> tuple[str | None, str]:
    """The kind to ask for on this target, or None with the reason it cannot be scanned at all.

    A repository takes only `repository` (and only on a plan with repositories); an audit runs only on a proved
    site of a plan with full audits, and otherwise the site gets the quick scan the plan and target allow.
    """
    if target.get("kind") == "repository":
        if not features.get("repositories"):
            return None, "the plan has no repositories (features.repositories is false)"
        return "repository", ""
    if wanted == "audit" and target.get("verified") and features.get("full_audit"):
        return "audit", ""
    return "quick", ""


@dataclass
class Budget:
    """Scans left to spend per quota kind, after the reserve kept for people."""

    remaining: dict[str, int]
    pack: int
    reserve: int
    spent: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_account(cls, account: dict[str, Any], reserve: int) -> Budget:
        quotas = account.get("quotas") or {}
        remaining = {q: int((quotas.get(q) or {}).get("remaining") or 0) for q in QUOTA_OF_KIND.values()}
        return cls(remaining, int((account.get("pack_credits") or {}).get("scans") or 0), reserve)

    def left(self, quota: str) -> int:
        return self.remaining[quota] + self.pack - self.reserve

    def allows(self, kind: str) -> bool:
        if kind == "repository":
            return True
        if kind == "audit":  # a fallback is charged as a quick scan
            return self.left("audits") > 0 and self.left("quick_scans") > 0
        return self.left(QUOTA_OF_KIND[kind]) > 0

    def charge(self, scan: dict[str, Any]) -> None:
        """Count what the service charged for this answer: nothing when reused, else the kind that ran."""
        quota = QUOTA_OF_KIND.get(str(scan.get("kind")))
        if scan.get("reused") or quota is None:
            return
        if scan.get("audit_fallback"):
            quota = "quick_scans"
        self.spent[quota] = self.spent.get(quota, 0) + 1
        if self.remaining[quota] > 0:
            self.remaining[quota] -= 1
        else:
            self.pack -= 1

    def exhausted(self, quota: str, account: dict[str, Any]) -> None:
        """The service refused this quota (402); `account` is read after the refusal. The refusal may be the
        replayed first answer of a retried tick (the contract may replay errors) from before credits were added,
        so what the account says now is what the other targets may spend."""
        now = Budget.from_account(account, self.reserve)
        self.remaining[quota], self.pack = now.remaining[quota], now.pack
