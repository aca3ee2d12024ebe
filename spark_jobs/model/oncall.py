"""The on-call actions of ``streaming_oncall`` as declarations: what each is called, and whether a second person
must approve it before it runs (no pyspark, no Airflow).

An action that destroys or rewrites data (``reset_checkpoint``, ``rollback_table``, ``reprocess_from``,
``rollout_destructive``) waits for the approval of a second user (four eyes, Airflow's human-in-the-loop); its request expires after
:attr:`OncallAction.approval_expires_after_seconds` and then runs nothing. The registry
(:data:`spark_jobs.registry.ONCALL_ACTION_SPECS`) holds the declarations; :func:`check_actions` refuses one that
contradicts itself when the registry loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping
from types import MappingProxyType

from spark_jobs.model.errors import RegistryError

# An approval request older than this is stale whatever an entry says: the plan it shows has aged.
MAX_APPROVAL_EXPIRY_SECONDS = 24 * 3600.0


@dataclass(frozen=True)
class OncallAction:
    """One on-call action.

    :param name: the action's name in the form (``restart``, ``rollback_table``, ...).
    :param label: what the form shows for it.
    :param needs_approval: it destroys or rewrites data: a second user must approve it (its dry run does not
        wait) and the requester cannot approve their own request.
    :param approval_expires_after_seconds: how long a request waits for approval; then it expires and runs
        nothing. Required with ``needs_approval`` (at most :data:`MAX_APPROVAL_EXPIRY_SECONDS`), ``None`` without.
    """

    name: str
    label: str
    needs_approval: bool = False
    approval_expires_after_seconds: float | None = None

    def __post_init__(self) -> None:
        expiry = self.approval_expires_after_seconds
        if self.needs_approval:
            if isinstance(expiry, bool) or not isinstance(expiry, (int, float)) or not 0 < expiry <= \
                    MAX_APPROVAL_EXPIRY_SECONDS:
                raise RegistryError(f"on-call action {self.name}: approval_expires_after_seconds {expiry!r} must be "
                                    f"a number of seconds in (0, {MAX_APPROVAL_EXPIRY_SECONDS:g}] for an action that "
                                    "needs approval (how long the request waits for a second user)")
        elif expiry is not None:
            raise RegistryError(f"on-call action {self.name}: approval_expires_after_seconds {expiry!r} is only for "
                                "an action that needs approval; drop it or set needs_approval=True")


def check_actions(actions: Iterable[OncallAction]) -> Mapping[str, OncallAction]:
    """The actions by name (read-only), each name once.

    :raises RegistryError: a name declared twice.
    """
    by_name: dict[str, OncallAction] = {}
    for action in actions:
        if action.name in by_name:
            raise RegistryError(f"on-call action {action.name}: declared twice; give each action its own name")
        by_name[action.name] = action
    return MappingProxyType(by_name)
