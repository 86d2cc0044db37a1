"""The stable codes of the scheduling app's refusals."""

from __future__ import annotations

from project.error_codes import ErrorCode


class SchedulingErrorCode(ErrorCode):
    """Refusals of changes to policy units and policies."""

    UNIT_IN_USE = "unit_in_use", "A policy uses the unit; remove it from there first."
    POLICY_IN_USE = "policy_in_use", "Clusters use the policy; give them another first."
    UNIT_IN_POLICY = "unit_in_policy", "The unit is in the policy already."
    BALANCER_EXISTS = "balancer_exists", "The policy has a balancer already (one at most)."
