"""OpenAPI details drf-spectacular cannot infer: the token scheme, and the error answers
that every operation can give in the API's one error format."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "fields"],
            "properties": {
                "code": {"type": "string", "example": "invalid"},
                "message": {"type": "string"},
                "fields": {
                    "type": "object",
                    "additionalProperties": True,
                    "description": "Per input: the sentences that refuse it.",
                },
            },
        }
    },
}

_ERRORS = {
    "400": "Malformed JSON, unknown or invalid fields, or a refusal by the domain's rules.",
    "401": "No credentials, or an unknown, expired or revoked token.",
    "403": "The token's scopes or the user's role do not allow this.",
    "404": "No such object among those you may see (another tenant's object included).",
    "405": "Method not allowed.",
    "406": "Not acceptable.",
    "409": "The object's state does not allow this now.",
    "413": "The request body is too large.",
    "415": "The body must be JSON.",
    "429": "Rate limit reached; retry after the Retry-After header's seconds.",
}


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "api.authentication.ApiTokenAuthentication"
    name = "apiToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "gpl_<prefix>_<secret>",
            "description": "Authorization: Bearer gpl_... (or Token gpl_...).",
        }


def add_error_responses(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """A postprocessing hook: every operation documents the error answers it can give."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = ERROR_SCHEMA
    ref = {"$ref": "#/components/schemas/Error"}
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            codes = ["400", "401", "403", "405", "406", "429"]
            if "{" in path:
                codes += ["404", "409"]
            if method in ("post", "put", "patch"):
                codes += ["413", "415"]
            if "404" not in codes:
                codes.append("404")  # invalid cursor or page
            for code in codes:
                operation["responses"].setdefault(
                    code,
                    {
                        "description": _ERRORS[code],
                        "content": {"application/json": {"schema": ref}},
                    },
                )
    return result
