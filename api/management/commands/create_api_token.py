from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from accounts import services as tokens
from leases import selectors as lease_selectors


class Command(BaseCommand):
    help = "Issue an API token for a user and print it once (it is stored only hashed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--scopes", default="read", help="comma-separated: read, write, audit (default read)"
        )
        parser.add_argument("--name", default="", help="a label to tell tokens apart")
        parser.add_argument(
            "--tenant",
            default=None,
            help="slug of the tenant the token acts for (needed when the user belongs to "
            "several; never for provider staff)",
        )
        parser.add_argument(
            "--expires-days",
            type=int,
            default=None,
            help="days until it expires (default API_TOKEN_DEFAULT_DAYS, "
            "at most API_TOKEN_MAX_DAYS)",
        )

    def handle(self, *args, **options) -> None:  # type: ignore[no-untyped-def]
        user = get_user_model()._default_manager.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"No user {options['username']!r}.")
        days = options["expires_days"]
        if days is not None and days < 1:
            raise CommandError("--expires-days must be 1 or more.")
        expires_at = timezone.now() + timedelta(days=days) if days else None
        tenant = None
        if options["tenant"]:
            tenant = lease_selectors.tenant_by_slug(slug=options["tenant"])
            if tenant is None:
                raise CommandError(f"No tenant {options['tenant']!r}.")
        try:
            issued = tokens.issue_token(
                user=user,
                scopes=options["scopes"].split(","),
                name=options["name"],
                expires_at=expires_at,
                tenant=tenant,
            )
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(issued.secret)
        token = issued.token
        self.stderr.write(
            f"Token {token.prefix} for {user.get_username()}"
            f"{f' in {token.tenant.slug}' if token.tenant else ''}, "
            f"scopes {','.join(token.scopes)}, "
            f"expires {token.expires_at.isoformat() if token.expires_at else 'never'}. "
            "It is shown this once; only its SHA-256 is kept."
        )
