"""The API's interactive documentation under the site's Content-Security-Policy.

Swagger UI: drf-spectacular's split view serves the start-up script from its own URL
(``?script``), so the page holds no inline script, and our template moves the page's few
styles into a static file. ReDoc styles itself with <style> elements made at run time
(styled-components) and searches in a worker it builds from a blob: URL; that page alone
allows inline styles and blob: workers. It shows the OpenAPI document, no tenant data, and
its scripts are still only files from this site."""

from csp.decorators import csp_update
from django.utils.decorators import method_decorator
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerSplitView


class SwaggerView(SpectacularSwaggerSplitView):
    template_name = "api/swagger_ui.html"


@method_decorator(
    csp_update({"style-src": ["'unsafe-inline'"], "worker-src": ["'self'", "blob:"]}),
    name="get",
)
class RedocView(SpectacularRedocView):
    template_name = "api/redoc.html"
