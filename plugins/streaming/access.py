"""Who may call a route of the streaming health plugin: every answer comes from Airflow's auth manager.

A plugin's FastAPI app is not behind Airflow's login: each route asks itself. The identity is Airflow's own
(``GetUserDep``: a bearer token from ``POST /auth/token`` or the UI's session cookie; none: 401, a bad one: 403), and
what that user may do is asked through the auth-manager interface only (``get_auth_manager()``:
``is_authorized_custom_view`` for this product's resources of :mod:`streaming.roles`, ``is_authorized_dag`` for a
DAG), never of FAB itself: FAB, the simple auth manager, Keycloak's or a company's own answer the same questions.
"""

# No `from __future__ import annotations`: FastAPI reads these routes' annotations, imported inside functions.


def may(user, method: str, resource: str) -> bool:
    """Whether ``user`` may ``method`` (``GET``, ``PUT`` ...) this product's ``resource`` (``streaming.roles``)."""
    from airflow.api_fastapi.app import get_auth_manager

    return bool(get_auth_manager().is_authorized_custom_view(method=method, resource_name=resource, user=user))


def may_dag(user, method: str, dag_id: str, entity: str | None = None) -> bool:
    """Whether ``user`` may ``method`` the DAG ``dag_id`` (or its ``entity``: ``HITL_DETAIL``, ``RUN`` ...)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    return bool(get_auth_manager().is_authorized_dag(
        method=method, user=user, access_entity=DagAccessEntity[entity] if entity else None,
        details=DagDetails(id=dag_id)))


def requires(method: str, resource: str):
    """A FastAPI dependency: the logged-in user (401 without a login), refused with 403 unless the auth manager
    lets them ``method`` ``resource``."""
    from fastapi import HTTPException

    from airflow.api_fastapi.core_api.security import GetUserDep

    def check(user: GetUserDep):
        if not may(user, method, resource):
            raise HTTPException(403, f"{user.get_name()} may not {'read' if method == 'GET' else method} "
                                     f"{resource} (ask an admin for a role that may: docs/identity.md)")
        return user

    return check


def requires_login():
    """A FastAPI dependency: the logged-in user (401 without a login, 403 with a bad token)."""
    from airflow.api_fastapi.core_api.security import GetUserDep

    def check(user: GetUserDep):
        return user

    return check
