"""The API's calls scanwatch never makes, for the tests that drive the simulator through them.

scanwatch's sync only reads, and its one write is the opt-in scheduled scan (`ScanningClient.start_scan`): these
reads of one object and writes (create a project, add a target, mark, recheck, unlock a fix) live on the
tests' side, on the product's client, so they go through the same pacing, retries and typed errors.
"""

from __future__ import annotations

from typing import Any

from pipelines.api import ScanningClient


class WritingClient(ScanningClient):
    """The product's client, with the calls only the tests make."""

    def get_project(self, project_id: str) -> dict[str, Any]:
        return self.request("GET", "/projects/{project_id}", path_params={"project_id": project_id})

    def get_issue(self, issue_id: str) -> dict[str, Any]:
        return self.request("GET", "/issues/{issue_id}", path_params={"issue_id": issue_id})

    def unlock_fix(self, issue_id: str, *, idempotency_key: str) -> dict[str, Any]:
        """Spends fix quota unless already unlocked: the key makes a retried unlock free."""
        return self.request("POST", "/issues/{issue_id}/fix", path_params={"issue_id": issue_id}, json={},
                            idempotency_key=idempotency_key)

    def get_fix(self, issue_id: str) -> dict[str, Any]:
        return self.request("GET", "/issues/{issue_id}/fix", path_params={"issue_id": issue_id})

    def create_project(self, name: str, url: str | None = None, *, idempotency_key: str) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name}
        if url is not None:
            body["url"] = url
        return self.request("POST", "/projects", json=body, idempotency_key=idempotency_key)

    def add_target(self, project_id: str, url: str, *, idempotency_key: str) -> dict[str, Any]:
        return self.request("POST", "/projects/{project_id}/targets", path_params={"project_id": project_id},
                            json={"url": url}, idempotency_key=idempotency_key)

    def mark_issue(self, issue_id: str, status: str, reason: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"status": status}
        if reason is not None:
            body["reason"] = reason
        return self.request("PATCH", "/issues/{issue_id}", path_params={"issue_id": issue_id}, json=body)

    def recheck_issue(self, issue_id: str, *, idempotency_key: str) -> dict[str, Any]:
        return self.request("POST", "/issues/{issue_id}/recheck", path_params={"issue_id": issue_id},
                            json={}, idempotency_key=idempotency_key)
