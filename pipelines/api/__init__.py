"""HTTP client of the Security Scanning Service: paced by the rate-limit headers, retried where safe, paginated
with one cursor walk, and failing with typed errors whose text says what to fix.

The request budget (120 a minute per key, shared with the service's agent server) is the product's real cost,
so every request is counted in ``client.stats``.
"""

from pipelines.core.credentials import mask_key

from .client import ScanningClient
from .errors import (
    ApiConnectionError,
    ApiError,
    ApiTimeoutError,
    AuthenticationError,
    ConflictError,
    DeadlineExceededError,
    InvalidRequestError,
    MalformedResponseError,
    NotFoundError,
    PagingError,
    PaymentRequiredError,
    PermissionDeniedError,
    PlanRequiredError,
    QuotaExceededError,
    RateLimitedError,
    RateLimitResetTooFarError,
    ResponseTooLargeError,
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
    "DeadlineExceededError",
    "InvalidRequestError",
    "MalformedResponseError",
    "NotFoundError",
    "Pacer",
    "PagingError",
    "PaymentRequiredError",
    "PermissionDeniedError",
    "PlanRequiredError",
    "QuotaExceededError",
    "RateLimitResetTooFarError",
    "RateLimitedError",
    "RequestStats",
    "ResponseTooLargeError",
    "RetryPolicy",
    "ScanningClient",
    "ServerError",
    "ServiceUnavailableError",
    "mask_key",
]
