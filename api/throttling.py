"""One rate (settings.API_RATE_LIMIT, e.g. "600/min") per API token; requests without a
token share their user's budget, anonymous ones their address's."""

from typing import Any

from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from api.models import ApiToken


class TokenRateThrottle(SimpleRateThrottle):
    scope = "api"

    def get_cache_key(self, request: Request, view: Any) -> str:
        if isinstance(request.auth, ApiToken):
            ident = f"token-{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user-{request.user.pk}"
        else:
            ident = f"ip-{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
