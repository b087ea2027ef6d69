"""The contract's error envelope, raised from anywhere in the simulator and rendered in one place."""

from __future__ import annotations

from typing import Any

from . import texts

DOCS_URL = "https://docs.scanning.example/errors/"
UPGRADE_URL = "https://app.scanning.example/settings/billing"
QUOTA_CODES = frozenset({"scan_quota_exceeded", "audit_quota_exceeded", "fix_quota_exceeded"})


class ApiError(Exception):
    """An error answer; `fmt` fills placeholders of the localized message (e.g. the missing scope)."""

    def __init__(self, status: int, code: str, *, param: str | None = None, headers: dict[str, str] | None = None,
                 **fmt: Any) -> None:
        super().__init__(code)
        self.status = status
        self.code = code
        self.param = param
        self.headers = headers or {}
        self.fmt = fmt

    def body(self, lang: str) -> dict[str, Any]:
        fmt = dict(self.fmt)
        if self.param is not None:
            fmt.setdefault("param", self.param)
        err: dict[str, Any] = {
            "type": self.code,
            "code": self.code,
            "message": texts.message(self.code, lang, **fmt),
            "doc_url": DOCS_URL + self.code,
        }
        if self.param is not None:
            err["param"] = self.param
        if self.code in QUOTA_CODES:
            err["upgrade_url"] = UPGRADE_URL
        return {"error": err}


def not_found() -> ApiError:
    return ApiError(404, "resource_not_found")


def invalid(param: str) -> ApiError:
    return ApiError(400, "parameter_invalid", param=param)
