"""Who may do what in this product's Airflow: the roles, declared once as data (no Airflow import).

Each role is a set of ``(action, resource)`` permissions in the vocabulary Airflow's auth-manager interface speaks
(``can_read`` / ``can_edit`` / ``can_create`` on ``DAGs``, ``DAG Runs``, ``DAG:<dag_id>`` ...; the FAB auth manager
stores exactly these). ``tools/fab_setup.py`` syncs them into the FAB auth manager at set-up (``make airflow``,
docker-compose's ``airflow-init``): each role ends up with exactly these permissions, no more.

The product never asks which role a user holds: it asks the auth manager whether the user may do something
(:data:`HEALTH_RESOURCE`, :data:`APPROVAL_RESOURCE` through ``is_authorized_custom_view``; a DAG through
``is_authorized_dag``), so another auth manager (Keycloak, a company's own) grants the same rights its own way.

- :data:`VIEWER` reads the health page and the runs, nothing else;
- :data:`OPERATOR` also triggers the catch-up and backfill DAGs and ``streaming_oncall`` (a plain ``restart`` runs
  at once; a destructive action waits for an approver) and reads the requests waiting for approval;
- :data:`APPROVER` reads like a viewer and alone may answer a destructive on-call request (Airflow's
  required actions of ``streaming_oncall`` and :data:`APPROVAL_RESOURCE`); it cannot trigger anything;
- :data:`SERVICE` is the identity of the connection ``airflow_api`` (:data:`SERVICE_USER`, never a person):
  read, pause, unpause and clear the ``<job>_continuous`` DAGs, what the on-call ``restart``, ``stop`` and
  ``resume_supervision`` do, and nothing else (it cannot trigger, answer or read the health page).
"""

from __future__ import annotations

from spark_jobs.registry import JOBS

ONCALL_DAG = "streaming_oncall"
# Resources of this product's own (the auth manager's "custom views").
HEALTH_RESOURCE = "Streaming Health"
APPROVAL_RESOURCE = "Streaming On-call Approvals"

VIEWER, OPERATOR, APPROVER, SERVICE = "streaming_viewer", "streaming_operator", "streaming_approver", "streaming_service"
SERVICE_USER = "streaming_service"  # the login of the connection airflow_api

READ, EDIT, CREATE, MENU = "can_read", "can_edit", "can_create", "menu_access"


def dag(dag_id: str) -> str:
    """The resource of one DAG (``DAG:<dag_id>``)."""
    return f"DAG:{dag_id}"


def catchup_and_backfill_dags() -> list[str]:
    """The DAGs an operator may trigger besides ``streaming_oncall`` (as ``dags/catchup.py`` and ``dags/backfill.py``
    make them)."""
    return sorted([f"{job.name}_catchup" for job in JOBS.values()]
                  + [f"{job.name}_backfill" for job in JOBS.values() if job.accepts_backfill])


def continuous_dags() -> list[str]:
    return sorted(f"{job.name}_continuous" for job in JOBS.values() if job.continuous_trigger)


# What every person's role holds: the UI itself, the DAGs and their runs, read only.
_LOOK = [(READ, "Website"), (READ, "DAGs"), (READ, "DAG Runs"), (READ, "Task Instances"), (READ, "Task Logs"),
         (READ, "DAG Code"), (READ, "DAG Versions"), (READ, "DAG Warnings"), (READ, "DAG Dependencies"),
         (MENU, "DAGs"), (MENU, "Browse"), (MENU, "DAG Runs"), (MENU, "Task Instances"),
         (READ, HEALTH_RESOURCE), (MENU, HEALTH_RESOURCE)]
_REQUIRED_ACTIONS = [(READ, "HITL Detail"), (MENU, "Required Actions"), (READ, "XComs")]

ROLES: dict[str, list[tuple[str, str]]] = {
    VIEWER: _LOOK,
    OPERATOR: [*_LOOK, *_REQUIRED_ACTIONS, (CREATE, "DAG Runs"),
               *[(EDIT, dag(dag_id)) for dag_id in [ONCALL_DAG, *catchup_and_backfill_dags()]]],
    APPROVER: [*_LOOK, *_REQUIRED_ACTIONS, (EDIT, "HITL Detail"), (EDIT, dag(ONCALL_DAG)),
               (READ, APPROVAL_RESOURCE), (EDIT, APPROVAL_RESOURCE)],
    SERVICE: [(READ, "DAG Runs"), (EDIT, "DAG Runs"), (READ, "Task Instances"), (EDIT, "Task Instances"),
              *[(action, dag(dag_id)) for dag_id in continuous_dags() for action in (READ, EDIT)]],
}

# The roles a person may be given (make airflow's teammate hint; the service role is no person's).
PERSON_ROLES = (VIEWER, OPERATOR, APPROVER)


def role_permissions(role: str) -> list[tuple[str, str]]:
    """The permissions of ``role``, sorted, without repeats.

    :raises KeyError: no such role, naming the known ones.
    """
    if role not in ROLES:
        raise KeyError(f"unknown role {role!r}; this product's roles: {', '.join(ROLES)}")
    return sorted(set(ROLES[role]))
