from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from common.models import TimeStampedModel
from common.querysets import TenantScopedQuerySet
from gpulease_verify.units import plain
from leases.choices import GpuModel, LinkLayer, NodeStatus, SwitchRole, Technology, Topology
from leases.validators import (
    validate_host_address,
    validate_hostname,
    validate_interface_name,
    validate_rdma_device_name,
)


class Site(TimeStampedModel):
    """A data centre."""

    name = models.CharField(_("name"), max_length=200, unique=True)
    code = models.SlugField(
        _("code"),
        max_length=32,
        unique=True,
        help_text=_("Short name; names the Celery queue of this site's probes."),
    )
    city = models.CharField(_("city"), max_length=100)
    region = models.CharField(_("region"), max_length=100, default="Guangdong")

    class Meta:
        verbose_name = _("site")
        verbose_name_plural = _("sites")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def probe_queue(self) -> str:
        """The Celery queue this site's probes go to (settings.PROBE_QUEUE_TEMPLATE)."""
        return settings.PROBE_QUEUE_TEMPLATE.format(site=self.code)


class Fabric(TimeStampedModel):
    """One inter-node network of a site: the thing contracts promise bandwidth on."""

    site = models.ForeignKey(
        Site, on_delete=models.PROTECT, related_name="fabrics", verbose_name=_("site")
    )
    name = models.CharField(_("name"), max_length=200)
    technology = models.CharField(_("technology"), max_length=16, choices=Technology.choices)
    port_speed_gbps = models.PositiveIntegerField(
        _("port speed (Gbps)"), validators=[MinValueValidator(1)]
    )
    topology = models.CharField(_("topology"), max_length=16, choices=Topology.choices)
    oversubscription = models.DecimalField(
        _("oversubscription ratio (收敛比)"),
        max_digits=5,
        decimal_places=2,
        default=Decimal("1"),
        help_text=_("Leaf downlink over uplink capacity: 2 means 2:1, 1 means non-blocking."),
    )
    adaptive_routing = models.BooleanField(_("adaptive routing"), default=False)

    class Meta:
        verbose_name = _("fabric")
        verbose_name_plural = _("fabrics")
        ordering = ["site__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["site", "name"], name="fabric_name_unique_per_site"),
            models.CheckConstraint(
                condition=models.Q(oversubscription__gte=1),
                name="fabric_oversubscription_at_least_1",
                violation_error_message=_(
                    "The oversubscription ratio cannot be below 1:1 (a leaf cannot send more "
                    "upward than its hosts can)."
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.site} / {self.name}"

    @property
    def oversubscription_label(self) -> str:
        return f"{plain(self.oversubscription)}:1"


class Switch(TimeStampedModel):
    fabric = models.ForeignKey(
        Fabric, on_delete=models.CASCADE, related_name="switches", verbose_name=_("fabric")
    )
    name = models.CharField(_("name"), max_length=100)
    role = models.CharField(_("role"), max_length=8, choices=SwitchRole.choices)
    # The switch-side witness (issue 14): read over SNMP by gpulease, never by the tenant.
    management_address = models.GenericIPAddressField(
        _("management address"),
        null=True,
        blank=True,
        help_text=_("Where gpulease reads the port counters over SNMP (IF-MIB)."),
    )
    snmp_port = models.PositiveIntegerField(
        _("SNMP port"), default=161, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    snmp_community = models.CharField(
        _("SNMP read-only community"),
        max_length=64,
        blank=True,
        help_text=_("SNMPv2c, read-only. Empty: the switch is not polled."),
    )

    class Meta:
        verbose_name = _("switch")
        verbose_name_plural = _("switches")
        ordering = ["fabric", "role", "name"]
        constraints = [
            models.UniqueConstraint(fields=["fabric", "name"], name="switch_name_unique_per_fabric")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_role_display()})"


class NodeQuerySet(TenantScopedQuerySet):
    def for_provider(self) -> "NodeQuerySet":
        return self.select_related("leaf_switch__fabric__site")


class Node(TimeStampedModel):
    """An 8-GPU server. Tenants see a node only while it is (or was) in one of their leases."""

    hostname = models.CharField(
        _("hostname"), max_length=200, unique=True, validators=[validate_hostname]
    )
    management_address = models.CharField(
        _("management address"),
        max_length=255,
        help_text=_("IP address or DNS name for SSH."),
        validators=[validate_host_address],
    )
    ssh_port = models.PositiveIntegerField(
        _("SSH port"), default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    ssh_user = models.CharField(_("SSH user"), max_length=64, default="gpulease")
    ssh_host_key = models.TextField(
        _("SSH host key"),
        blank=True,
        help_text=_("Pinned OpenSSH public host key; probes refuse a host whose key differs."),
    )
    gpu_model = models.CharField(_("GPU model"), max_length=16, choices=GpuModel.choices)
    gpu_count = models.PositiveSmallIntegerField(_("GPU count"), default=8)
    leaf_switch = models.ForeignKey(
        Switch,
        on_delete=models.PROTECT,
        related_name="nodes",
        verbose_name=_("leaf switch"),
        limit_choices_to={"role": SwitchRole.LEAF},
    )
    status = models.CharField(
        _("status"), max_length=16, choices=NodeStatus.choices, default=NodeStatus.AVAILABLE
    )

    objects = NodeQuerySet.as_manager()
    tenant_path = "assignments__lease__tenant"
    tenant_path_is_many = True

    class Meta:
        verbose_name = _("node")
        verbose_name_plural = _("nodes")
        ordering = ["hostname"]

    def __str__(self) -> str:
        return self.hostname


class NicPort(TimeStampedModel):
    node = models.ForeignKey(
        Node, on_delete=models.CASCADE, related_name="nic_ports", verbose_name=_("node")
    )
    device = models.CharField(
        _("device"),
        max_length=32,
        help_text=_("For example mlx5_0."),
        validators=[validate_rdma_device_name],
    )
    port_number = models.PositiveSmallIntegerField(
        _("port number"), default=1, validators=[MinValueValidator(1), MaxValueValidator(255)]
    )
    netdev = models.CharField(
        _("network interface"),
        max_length=32,
        blank=True,
        validators=[validate_interface_name],
    )
    address = models.GenericIPAddressField(
        _("data address"),
        null=True,
        blank=True,
        help_text=_("Address on the inter-node fabric that throughput probes target."),
    )
    rate_gbps = models.PositiveIntegerField(_("rate (Gbps)"))
    link_layer = models.CharField(_("link layer"), max_length=16, choices=LinkLayer.choices)
    switch_port = models.CharField(
        _("switch port"),
        max_length=64,
        blank=True,
        help_text=_(
            "The port's name (IF-MIB ifName) on the node's leaf switch, for the switch-side "
            "witness. Empty: this port is not cross-checked."
        ),
    )

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "node__assignments__lease__tenant"
    tenant_path_is_many = True

    class Meta:
        verbose_name = _("NIC port")
        verbose_name_plural = _("NIC ports")
        ordering = ["node", "device", "port_number"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "device", "port_number"], name="nic_port_unique_per_node"
            )
        ]

    def __str__(self) -> str:
        return f"{self.node}:{self.device}/{self.port_number}"
