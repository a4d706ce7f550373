from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class LeasesConfig(AppConfig):
    name = "leases"
    verbose_name = _("Leases and inventory")

    def ready(self) -> None:
        from common import archives
        from leases import links
        from leases.selectors import archived_names

        archives.add_manifest_part(archived_names)  # the references and terms runs name
        links.register()  # each lease's hash chain, its terms versions and tenant records
