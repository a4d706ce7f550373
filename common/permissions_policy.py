"""The Permissions-Policy header: every browser feature in settings.PERMISSIONS_POLICY is
denied (``camera=()``) to our pages and to anything they embed. No page of ours asks for a
camera, a microphone, a location or a payment; a script that slipped in could not either."""

from django.conf import settings


def header_value(features: list[str]) -> str:
    return ", ".join(f"{feature}=()" for feature in features)


class PermissionsPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response
        self.value = header_value(settings.PERMISSIONS_POLICY)

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Permissions-Policy", self.value)
        return response
