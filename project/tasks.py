"""Project's own loop: old events and expired tokens are pruned (and the schedules of loop runs
whose key is gone, such as a deleted cluster's balancer, forgotten)."""

from __future__ import annotations

from project import events, loops
from project.access import tokens

PRUNE_EVERY_S = 600


def prune() -> None:
    events.prune()
    tokens.prune()
    for loop in loops.registered():
        if loop.keys is not None:
            loops.forget_expired(f"{loops.DUE}{loop.name}-")


def register() -> None:
    loops.register("prune-events", prune, every=lambda: PRUNE_EVERY_S, threaded=False)
