from leases.models.cosign import TenantKey, TenantLink
from leases.models.events import LeaseEvent, TenantSettingsEvent
from leases.models.inventory import Fabric, NicPort, Node, Site, Switch
from leases.models.leases import Lease, NodeAssignment
from leases.models.tenants import Tenant
from leases.models.terms import LeaseTerms, TermsAmendment

__all__ = [
    "Fabric",
    "Lease",
    "LeaseEvent",
    "LeaseTerms",
    "NicPort",
    "Node",
    "NodeAssignment",
    "Site",
    "Switch",
    "Tenant",
    "TenantKey",
    "TenantLink",
    "TenantSettingsEvent",
    "TermsAmendment",
]
