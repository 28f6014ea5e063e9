"""A group join that finished while no ``poll`` was waiting, kept (the kafka-python engine only).

kafka-python 3.0 runs JoinGroup and SyncGroup as a task on its IO thread, and a ``poll`` that gives up leaves it
in flight for the next. But a task that has *finished* by then is thrown away for a fresh JoinGroup
(``BaseCoordinator.join_group_async`` in ``kafka/coordinator/base.py``: ``if self._join_task is None or
self._join_task.is_done``): a caller whose polls are short or far apart joins again and again and reads nothing.

As Java's consumer (``AbstractCoordinator.joinGroupIfNeeded``) does, a finished, successful join task is handed
back as a task not yet done that yields the same assignment, so the loop completes it; a failed one is left to the
loop's retry. Pinned by tests/test_bus_kafka_python.py (the bare client still loses such a join).
"""

from __future__ import annotations

COORDINATOR = "_coordinator"
# the coordinator's in-flight (or finished, not yet completed) JoinGroup+SyncGroup
JOIN_TASK = "_join_task"
# schedules work on the client's IO loop
MANAGER = "_manager"


def keep_finished_joins(consumer) -> None:
    """Make ``consumer``'s coordinator complete a join that finished between polls instead of joining again."""
    coordinator = getattr(consumer, COORDINATOR)
    manager = getattr(coordinator, MANAGER)
    join_group_async = coordinator.join_group_async

    async def join_keeping_finished(timeout_ms=None):
        task = getattr(coordinator, JOIN_TASK)
        if task is not None and task.is_done and task.succeeded():
            assignment = task.value
            # scheduled, so not done when the loop looks at it: the loop awaits it and completes the join
            setattr(coordinator, JOIN_TASK, manager.call_soon(lambda: assignment))
        return await join_group_async(timeout_ms=timeout_ms)

    coordinator.join_group_async = join_keeping_finished
