"""HTTP client of the Security Scanning Service: paced by the rate-limit headers, retried where safe, paginated
with one cursor walk, and failing with typed errors whose text says what to fix.

The request budget (120 a minute per key, shared with the service's agent server) is the product's real cost,
so every request is counted in ``client.stats``.
"""

from .client import ScanningClient, mask_key
from .errors import (
    ApiConnectionError,
    ApiError,
    ApiTimeoutError,
    AuthenticationError,
    ConflictError,
    InvalidRequestError,
    MalformedResponseError,
    NotFoundError,
    PaymentRequiredError,
    PermissionDeniedError,
    PlanRequiredError,
    QuotaExceededError,
    RateLimitedError,
    ServerError,
    ServiceUnavailableError,
)
from .pacing import Pacer
from .retry import RetryPolicy
from .stats import RequestStats

__all__ = [
    "ApiConnectionError",
    "ApiError",
    "ApiTimeoutError",
    "AuthenticationError",
    "ConflictError",
    "InvalidRequestError",
    "MalformedResponseError",
    "NotFoundError",
    "Pacer",
    "PaymentRequiredError",
    "PermissionDeniedError",
    "PlanRequiredError",
    "QuotaExceededError",
    "RateLimitedError",
    "RequestStats",
    "RetryPolicy",
    "ScanningClient",
    "ServerError",
    "ServiceUnavailableError",
    "mask_key",
]
