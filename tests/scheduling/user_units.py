"""Policy units written outside Corral, as a site would write them, registered through
``settings.CORRAL_SCHEDULING_UNITS``."""

import threading

from scheduling.units.base import PolicyUnitBase, PropertySpec

# What the hanging units wait for: nothing sets it in a task cluster, so there they hang for as
# long as it runs; a test that hangs them sets it at its end (tests/scheduling/conftest.py) so
# its threads do not outlive it.
HANGS = threading.Event()
# While true, FlakyFilter fails.
FLAKY = {"failing": True}


class PreferNamedHost(PolicyUnitBase):
    """A weight: the host named by the PreferredHost property first."""

    name = "PreferNamedHost"
    description = "Prefer the host named by PreferredHost."
    properties = {
        "PreferredHost": PropertySpec("", "Name of the preferred host", regex=r"[A-Za-z0-9._-]*")
    }

    def score(self, hosts, ctx):
        wanted = ctx.properties.get("PreferredHost", "")
        return {h.id: 0.0 if h.name == wanted else 1.0 for h in hosts}


class AvoidNamedHost(PolicyUnitBase):
    """A filter: never the host named by the AvoidedHost property."""

    name = "AvoidNamedHost"
    description = "Never the host named by AvoidedHost."
    properties = {"AvoidedHost": PropertySpec("", "Name of the avoided host", regex=r"[\w.-]*")}

    def filter(self, hosts, ctx):
        avoided = ctx.properties.get("AvoidedHost", "")
        return {h.id: "avoided by the site" for h in hosts if h.name == avoided}


class BrokenFilter(PolicyUnitBase):
    """A filter that fails whenever it runs (its database is down, say)."""

    name = "BrokenFilter"
    description = "Fails every time."

    def filter(self, hosts, ctx):
        raise RuntimeError("the inventory database is down")


class BrokenWeight(PolicyUnitBase):
    """A weight that fails whenever it runs."""

    name = "BrokenWeight"
    description = "Fails every time."

    def score(self, hosts, ctx):
        return {h.id: 1 / 0 for h in hosts}


class NotAUnit:
    """A class that is not a policy unit at all."""

    name = "NotAUnit"


class DoesNothing(PolicyUnitBase):
    """A unit that implements none of filter, score and balance."""

    name = "DoesNothing"


class ScoresAsList(PolicyUnitBase):
    """A weight that answers in the wrong shape: a list instead of {host id: score}."""

    name = "ScoresAsList"
    description = "Returns a list."

    def score(self, hosts, ctx):
        return [0.0 for _ in hosts]


class ScoresNothing(PolicyUnitBase):
    """A weight whose scores are not numbers."""

    name = "ScoresNothing"
    description = "Returns None for every host."

    def score(self, hosts, ctx):
        return {h.id: None for h in hosts}


class HangingFilter(PolicyUnitBase):
    """A filter that never answers (it waits for a service that does not reply)."""

    name = "HangingFilter"
    description = "Waits forever."

    def filter(self, hosts, ctx):
        HANGS.wait()
        return {}


class HangingWeight(PolicyUnitBase):
    """A weight that never answers."""

    name = "HangingWeight"
    description = "Waits forever."

    def score(self, hosts, ctx):
        HANGS.wait()
        return {h.id: 0.0 for h in hosts}


class HangingBalancer(PolicyUnitBase):
    """A balancer that never answers."""

    name = "HangingBalancer"
    description = "Waits forever."

    def balance(self, hosts, ctx):
        HANGS.wait()


class FlakyFilter(PolicyUnitBase):
    """A filter that fails while ``FLAKY["failing"]``, and removes nothing otherwise."""

    name = "FlakyFilter"
    description = "Fails while its service is down."

    def filter(self, hosts, ctx):
        if FLAKY["failing"]:
            raise ConnectionError("the placement service is down")
        return {}
