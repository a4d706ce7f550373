"""Request budgets of the API, all kept in the cache (CACHE_URL shares them between web
workers):

- API_RATE_LIMIT (e.g. "600/min") per API token; session requests share their user's;
- API_ANON_RATE_LIMIT per address for anonymous requests to the open routes (the public
  key, the schema);
- API_AUTH_FAILURE_LIMIT per address for requests that end in 401 (no credentials, an
  unknown, malformed, expired or revoked token). An address that has spent it gets 429 for
  every request, good token or not, until its window has passed: guessing tokens costs
  the guesser, not the API.
- PORTAL_RATE_LIMIT per signed-in user (else per address) for the portal's pages
  (portal.middleware), and AUDIT_BUNDLE_RATE_LIMIT per user for signed audit bundles, one
  budget whether the portal or the API serves them: each is built and signed on demand.

Addresses are common.client_address's: REMOTE_ADDR unless TRUSTED_PROXY_COUNT says how
many proxies in front of us append to X-Forwarded-For (a client-written header is never
trusted)."""

from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from accounts.models import ApiToken
from common.client_address import client_address


class AddressRateThrottle(SimpleRateThrottle):
    """A budget whose ident, where it is an address, is common.client_address's."""

    def get_ident(self, request: Request) -> str:
        return client_address(request)


class TokenRateThrottle(AddressRateThrottle):
    scope = "api"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if isinstance(request.auth, ApiToken):
            ident = f"token-{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            return None  # AnonymousRateThrottle's
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AnonymousRateThrottle(AddressRateThrottle):
    scope = "anon"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if request.user and request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class UserRateThrottle(AddressRateThrottle):
    """A budget per signed-in user (all their tokens and sessions together), else per
    address, at the rate the setting ``rate_setting`` names (empty: no limit)."""

    rate_setting = ""

    def get_rate(self) -> str | None:
        return getattr(settings, self.rate_setting) or None

    def get_cache_key(self, request: Request, view: Any = None) -> str:
        user = getattr(request, "user", None)
        ident = f"user-{user.pk}" if user and user.is_authenticated else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}


class PortalRateThrottle(UserRateThrottle):
    scope = "portal"
    rate_setting = "PORTAL_RATE_LIMIT"


class AuditBundleRateThrottle(UserRateThrottle):
    scope = "audit_bundle"
    rate_setting = "AUDIT_BUNDLE_RATE_LIMIT"


class AuthFailureBudget(AddressRateThrottle):
    """Counts an address's 401s; ``wait`` says how long it is still shut out."""

    scope = "auth_failure"

    def get_cache_key(self, request: Request, view: Any = None) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _history(self, request: Request) -> list[float]:
        self.key = self.get_cache_key(request)
        self.now = self.timer()
        history = self.cache.get(self.key, [])
        return [at for at in history if at > self.now - self.duration]

    def spent(self, request: Request) -> float | None:
        """Seconds until the address may try again, or None while it has budget left."""
        self.history = self._history(request)
        if len(self.history) < self.num_requests:
            return None
        return self.wait()

    def spend(self, request: Request) -> None:
        history = self._history(request)
        history.insert(0, self.now)
        self.cache.set(self.key, history, self.duration)


class AddressGuard(BaseAuthentication):
    """First of the authentication classes: an address that spent its 401 budget is
    refused before any token is looked up. It never authenticates anyone itself."""

    def authenticate(self, request: Request) -> None:
        wait = AuthFailureBudget().spent(request)
        if wait is not None:
            raise exceptions.Throttled(
                wait=wait,
                detail=_(
                    "Too many requests from your address failed to authenticate; try again later."
                ),
            )
        return None

    def authenticate_header(self, request: Request) -> str:
        # DRF asks the first class for WWW-Authenticate; without one a 401 would become 403.
        from api.authentication import ApiTokenAuthentication

        return ApiTokenAuthentication().authenticate_header(request)


def note_failed_authentication(request: Request | None) -> None:
    if request is not None:
        AuthFailureBudget().spend(request)
