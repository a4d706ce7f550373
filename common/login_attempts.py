"""Failed logins as django-axes counts them (AXES_HANDLER, AXES_USERNAME_CALLABLE).

Lockouts go by username and by client address (AXES_LOCKOUT_PARAMETERS): either reaching
LOGIN_FAILURE_LIMIT locks it out. Axes' own reset on success deletes every attempt that
shares a lockout parameter with the one who logged in, so an attacker who logs in to an
account of their own between guesses wipes the count of the account they are guessing
(and of every other one guessed from their address). Here a success clears only what it
proves was a typo: that username's failures from that address. Another username's
failures stay, and so do the same username's failures from elsewhere.

Django's login form checks a username's length only in the browser, so a failed login
with a 10,000-character username reaches axes, whose AccessAttempt.username is a
varchar(255): PostgreSQL refuses the row and the login page answers 500 (SQLite does not
enforce the length). Cut to what the column holds, the attempt is counted like any other."""

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.http import HttpRequest

USERNAME_COLUMN_LENGTH = 255  # axes.models.AccessBase.username


def attempted_username(request: HttpRequest, credentials: dict[str, Any] | None = None) -> Any:
    source = credentials or getattr(request, "data", None) or getattr(request, "POST", {})
    username = source.get("username")
    return username[:USERNAME_COLUMN_LENGTH] if isinstance(username, str) else username


class OwnFailuresHandler(AxesDatabaseHandler):
    def reset_user_attempts(self, request: HttpRequest, credentials: dict | None = None) -> int:
        """On a successful login (AXES_RESET_ON_SUCCESS): that username from that address."""
        deleted, _ = AccessAttempt.objects.filter(
            username=get_client_username(request, credentials),
            ip_address=request.axes_ip_address,  # type: ignore[attr-defined]
        ).delete()
        return deleted
