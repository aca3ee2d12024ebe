"""The FAB auth manager's roles and set-up users, synced from :mod:`streaming.roles` (``make airflow``,
docker-compose's ``airflow-init``).

Run with the Airflow environment (its metadata DB migrated), the users as JSON on stdin, so no password is ever on a
command line (``ps``) or in a log::

    echo '{"users": [{"username": "admin", "role": "Admin", "password": "..."}]}' | python tools/fab_setup.py

1. Every role of :data:`streaming.roles.ROLES` is created if missing and left with exactly its declared permissions
   (missing ones added, others removed) through FAB's own security manager, the one ``airflow roles`` and
   ``airflow users`` use.
2. Every user given is created with its role if missing; an existing user keeps its password (unless the entry says
   ``"sync_password": true``: the service user's, whose one source is the set-up's file or ``.env``, so rotating it
   there rotates it in FAB), and a set-up user's roles are set to the one given (the service user never gains a
   person's role). Teammates are added by people with ``airflow users create`` and are never touched here.

Prints one JSON line: ``{"created": [usernames], "roles": {role: permission count}}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

for _folder in (Path(__file__).resolve().parents[1], Path(__file__).resolve().parents[1] / "plugins"):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))


def sync_roles(sm, roles: dict[str, list[tuple[str, str]]]) -> dict[str, int]:
    """Each role of ``roles`` with exactly its permissions. :returns: role -> permission count."""
    counts = {}
    for name, wanted in roles.items():
        role = sm.find_role(name) or sm.add_role(name)
        wanted = set(wanted)
        for action, resource in sorted(wanted):
            permission = sm.get_permission(action, resource) or sm.create_permission(action, resource)
            if permission not in role.permissions:
                sm.add_permission_to_role(role, permission)
        for permission in list(role.permissions):
            if (permission.action.name, permission.resource.name) not in wanted:
                sm.remove_permission_from_role(role, permission)
        counts[name] = len(wanted)
    return counts


def ensure_users(sm, users: list[dict]) -> list[str]:
    """Create each user that is missing. :returns: the usernames created."""
    created = []
    for user in users:
        role = sm.find_role(user["role"])
        if role is None:
            raise SystemExit(f"role {user['role']!r} does not exist; roles: {[r.name for r in sm.get_all_roles()]}")
        found = sm.find_user(username=user["username"])
        if found is None:
            if not sm.add_user(user["username"], user["username"], "(set-up)", f"{user['username']}@localhost",
                               role, user["password"]):
                raise SystemExit(f"FAB could not create the user {user['username']!r}")
            created.append(user["username"])
        else:
            if [r.name for r in found.roles] != [role.name]:
                found.roles = [role]
                sm.update_user(found)
            if user.get("sync_password"):
                sm.reset_password(found.id, user["password"])
    return created


def main() -> int:
    from airflow.providers.fab.auth_manager.cli_commands.utils import get_application_builder

    from streaming.roles import ROLES

    given = json.loads(sys.stdin.read() or "{}")
    with get_application_builder() as appbuilder:
        counts = sync_roles(appbuilder.sm, ROLES)
        created = ensure_users(appbuilder.sm, given.get("users", []))
    print(json.dumps({"created": created, "roles": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
