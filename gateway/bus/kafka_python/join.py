"""A group join that finished while no ``poll`` was waiting, kept (the kafka-python engine only).

kafka-python 3.0 runs JoinGroup and SyncGroup as a task on its IO thread and lets ``poll(timeout_ms)`` give up
while the task is still in flight; the next ``poll`` is meant to await the same task. But when the task has
*finished* by then, the next ``poll`` sees it done and sends a fresh JoinGroup, throwing away the assignment the
finished one brought (``BaseCoordinator.join_group_async`` in ``kafka/coordinator/base.py``: ``if self._join_task
is None or self._join_task.is_done``). A broker that holds JoinGroup for its rebalance delay and a caller whose
polls are short or far apart then join again and again and never read a record.

Java's consumer (``AbstractCoordinator.joinGroupIfNeeded``) completes a join future that is already done. This
does the same: a finished, successful join task is handed back to the loop as a task not yet done that yields the
same assignment, so the loop completes it (assignment, listener, heartbeat) instead of joining again. A failed
task is left alone: the loop's retry is right for it. Pinned by tests/test_bus_kafka_python.py, which shows the
bare client still loses such a join (else this module can go) and that a member with it keeps it.
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
