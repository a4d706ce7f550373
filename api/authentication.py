"""`Authorization: Bearer gpl_...` (or `Token gpl_...`). A header that names a token
must carry a good one: unknown, malformed, expired and revoked tokens answer 401 with the
reason. Without such a header, the next class (session) is tried.

The query that finds the token also tells whether its standing still holds
(``ApiToken.with_standing``); one that no longer does is revoked here and answers 401 with
the reason. A token of a tenant makes the request act for that tenant only
(``common.querysets.acting_for``)."""

from typing import Any

from django.utils.translation import gettext as _
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts import selectors as token_selectors
from accounts import services as tokens
from accounts.models import ApiToken, split_token
from accounts.selectors import lapse_reason
from common.querysets import acting_for

KEYWORDS = ("bearer", "token")


class ApiTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() not in KEYWORDS:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                _("The Authorization header must be 'Bearer gpl_<prefix>_<secret>'.")
            )
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed(_("The API token is malformed.")) from None
        prefix = split_token(raw)
        if prefix is None:
            raise exceptions.AuthenticationFailed(
                _("The API token is malformed: tokens read gpl_<prefix>_<secret>.")
            )
        token = token_selectors.token_with_standing(prefix=prefix)
        if token is None or not token.matches(raw):
            raise exceptions.AuthenticationFailed(_("Unknown API token."))
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed(
                _("This API token was revoked at %(at)s.") % {"at": token.revoked_at.isoformat()}
            )
        if token.is_expired():
            raise exceptions.AuthenticationFailed(
                _("This API token expired at %(at)s.") % {"at": token.expires_at.isoformat()}  # type: ignore[union-attr]
            )
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("The user of this API token is inactive."))
        if not token.standing_ok:  # type: ignore[attr-defined]
            reason = lapse_reason(token)
            tokens.revoke_token(token=token)
            raise exceptions.AuthenticationFailed(
                _("This API token no longer holds: %(reason)s. It is revoked now.")
                % {"reason": reason}
            )
        tokens.touch(token)
        acting_for(token.user, token.tenant_id)
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="gpulease"'
