"""The scheduling policies' admin role, and what cluster admins may do with scheduling."""

from project.access import roles


def register() -> None:
    roles.define(
        "PolicyAdmin",
        "Manages scheduling policies and the clusters' choice of policy.",
        ["hosts.view_cluster", "hosts.change_cluster", "hosts.view_host"],
        apps=["scheduling"],
    )
    roles.contribute(
        "ClusterAdmin",
        [
            "scheduling.view_affinitygroup",
            "scheduling.add_affinitygroup",
            "scheduling.change_affinitygroup",
            "scheduling.delete_affinitygroup",
            "scheduling.view_policy",
            "scheduling.view_policyunit",
        ],
    )
