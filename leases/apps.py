from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class LeasesConfig(AppConfig):
    name = "leases"
    verbose_name = _("Leases and inventory")
