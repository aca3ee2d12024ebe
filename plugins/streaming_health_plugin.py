"""The ``streaming_health`` Airflow plugin: the streaming health page inside the Airflow UI.

It mounts :func:`streaming.health_page.create_app` on the API server at ``/streaming-health`` (every
route asks Airflow's auth manager) and adds it to the UI three times: "Streaming health" in the
navigation (every job), a "Stream health" tab on every DAG's page (the job that DAG runs; a DAG
that runs none says so), and "On-call approvals" in the navigation (the destructive on-call requests waiting for
a second person). Airflow's plugin loader imports this file in every component; it imports
no pyspark, and the page's work happens only when a route is called.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from streaming.health_page import URL_PREFIX, create_app


class StreamingHealthPlugin(AirflowPlugin):
    """The page (a FastAPI app) and its two places in the UI (``external_views``)."""

    name = "streaming_health"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Streaming health"}]
    external_views = [
        {"name": "Streaming health", "href": f"{URL_PREFIX.lstrip('/')}/", "destination": "nav",
         "url_route": "streaming-health", "category": "browse"},
        {"name": "Stream health", "href": f"{URL_PREFIX.lstrip('/')}/dag/{{DAG_ID}}", "destination": "dag",
         "url_route": "stream-health"},
        {"name": "On-call approvals", "href": f"{URL_PREFIX.lstrip('/')}/oncall", "destination": "nav",
         "url_route": "oncall-approvals", "category": "browse"},
    ]
