"""What django-axes records as the username of a failed login (AXES_USERNAME_CALLABLE).

Django's login form checks a username's length only in the browser, so a failed login
with a 10,000-character username reaches axes, whose AccessAttempt.username is a
varchar(255): PostgreSQL refuses the row and the login page answers 500 (SQLite does not
enforce the length). Cut to what the column holds, the attempt is counted like any other;
lockouts go by address (AXES_LOCKOUT_PARAMETERS), not by this name."""

from typing import Any

from django.http import HttpRequest

USERNAME_COLUMN_LENGTH = 255  # axes.models.AccessBase.username


def attempted_username(request: HttpRequest, credentials: dict[str, Any] | None = None) -> Any:
    source = credentials or getattr(request, "data", None) or getattr(request, "POST", {})
    username = source.get("username")
    return username[:USERNAME_COLUMN_LENGTH] if isinstance(username, str) else username
