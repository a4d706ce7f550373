from celery import shared_task


@shared_task(name="common.ping")
def ping(token: str) -> str:
    """Round trip used by health checks and tests to prove a worker is consuming."""
    return f"pong:{token}"
