"""Celery tasks: thin adapters that call a service.

Beat runs ``telemetry.poll`` on the default queue; it only sends one ``telemetry.poll_site``
per site that holds leased nodes to that site's probe queue, so that each data centre's
worker reads its own nodes and keeps their connections open."""

from celery import shared_task

from leases.selectors import sites_among
from telemetry import services


@shared_task(name="telemetry.poll", ignore_result=True)
def poll() -> int:
    sites = {held.node.leaf_switch.fabric.site_id for held in services.held_nodes(None)}
    for site in sites_among(pks=sites):
        poll_site.apply_async(args=[site.pk], queue=site.probe_queue)
    return len(sites)


@shared_task(name="telemetry.poll_site", ignore_result=True)
def poll_site(site_id: int) -> dict[str, int]:
    result = services.poll(site_id=site_id)
    return {
        "nodes": result.nodes,
        "samples": result.samples,
        "failed": len(result.failed),
        "opened": len(result.opened),
        "closed": len(result.closed),
    }
