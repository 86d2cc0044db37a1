"""The soak's users: each a thread acting like a person through the API only, with a think
time between actions. Every answer is recorded (kind, status, time taken) and checked as it
comes: well-formed (JSON, no 500, a 503 only with Retry-After), and no VM handed to a user
while another holds it.

- pool users take a VM from a pool, start, stop, suspend and resume it, look at it and its
  jobs, and give it back;
- lease users reserve an instance for a few minutes, launch a VM into the lease once it is
  active, start it, extend or delete the lease;
- admins migrate running VMs, resize pools and change clusters' scheduling policies;
- pollers keep a long poll of the event feed open, resuming from their last token;
- two feed readers (admins) record every event they are given: one reads without a break, the
  other drops its connection now and then and resumes from its last token; two more follow the
  portal's live stream with a session, reconnecting with Last-Event-ID as a browser does.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

REQUEST_TIMEOUT_S = 40
POLL_TIMEOUT_S = 25


@dataclass
class Call:
    kind: str
    status: int | None  # None: no answer (connection refused or reset, or timed out)
    ms: float
    at: float  # time.monotonic() when it was sent
    user: str
    note: str = ""


@dataclass
class Violation:
    invariant: str
    at: float
    what: str
    history: list[str] = field(default_factory=list)


class Record:
    """Every call and violation of the run, shared by the threads."""

    def __init__(self, started: float):
        self.started = started
        self.lock = threading.Lock()
        self.calls: list[Call] = []
        self.violations: list[Violation] = []
        self.vm_history: dict[int, list[str]] = {}

    def call(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)

    def violation(self, invariant: str, what: str, history: list[str] | None = None) -> None:
        with self.lock:
            self.violations.append(Violation(invariant, time.monotonic(), what, history or []))

    def vm(self, vm_id: int, line: str) -> None:
        """A line of a VM's history, as the users saw it (kept for a violation's report)."""
        stamp = f"{time.monotonic() - self.started:8.1f}s"
        with self.lock:
            self.vm_history.setdefault(vm_id, []).append(f"{stamp} {line}")

    def history(self, vm_id: int) -> list[str]:
        with self.lock:
            return list(self.vm_history.get(vm_id, []))


class Holders:
    """Who holds each pool VM, as the API told the users: taken when an allocation answers,
    released when its user's return is sent (so a lost answer never counts as held)."""

    def __init__(self, record: Record):
        self.record = record
        self.lock = threading.Lock()
        self.held: dict[int, str] = {}

    def take(self, vm_id: int, user: str) -> None:
        with self.lock:
            other = self.held.get(vm_id)
            self.held[vm_id] = user
        self.record.vm(vm_id, f"{user} is handed it")
        if other is not None and other != user:
            self.record.violation(
                "one holder",
                f"VM {vm_id} was handed to {user} while {other} held it",
                self.record.history(vm_id),
            )

    def release(self, vm_id: int, user: str) -> None:
        with self.lock:
            if self.held.get(vm_id) == user:
                del self.held[vm_id]
        self.record.vm(vm_id, f"{user} gives it back")


class Client:
    """One user's HTTP session: every call recorded and checked."""

    def __init__(self, base_url: str, token: str, name: str, record: Record):
        self.base_url = base_url
        self.name = name
        self.record = record
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"
        # As HTTP lets a client do (RFC 9112, 9.3.1), and browsers do: a GET sent on a kept-alive
        # connection the server closed meanwhile is sent once more. Nothing else is retried.
        # Answers are never retried here, a 503 with Retry-After included: they are checked.
        once = Retry(
            total=1,
            connect=1,
            read=1,
            status=0,
            allowed_methods={"GET"},
            respect_retry_after_header=False,
            raise_on_status=False,
        )
        self.session.mount("http://", HTTPAdapter(max_retries=once))

    def call(
        self, kind: str, method: str, path: str, body: dict | None = None, timeout: float = 0
    ) -> tuple[int | None, object]:
        sent = time.monotonic()
        try:
            response = self.session.request(
                method,
                f"{self.base_url}/api/{path}",
                json=body,
                timeout=timeout or REQUEST_TIMEOUT_S,
            )
        except requests.RequestException as exc:
            self.record.call(Call(kind, None, _ms(sent), sent, self.name, type(exc).__name__))
            self.session.close()  # a fresh connection next time
            return None, None
        answer = self._check(kind, method, path, response)
        self.record.call(
            Call(kind, response.status_code, _ms(sent), sent, self.name, _note(answer))
        )
        return response.status_code, answer

    def _check(self, kind, method, path, response) -> object:
        where = f"{method} /api/{path} ({kind}) as {self.name}"
        if response.status_code == 204 and not response.content:
            return None
        try:
            answer = response.json()
        except ValueError:
            self.record.violation(
                "well-formed answers",
                f"{where}: {response.status_code} not JSON: {response.text[:200]!r}",
            )
            return None
        if response.status_code >= 500 and not (
            response.status_code == 503 and response.headers.get("Retry-After")
        ):
            self.record.violation(
                "well-formed answers", f"{where}: {response.status_code} {str(answer)[:300]}"
            )
        return answer


def _ms(sent: float) -> float:
    return (time.monotonic() - sent) * 1000


def _note(answer: object) -> str:
    if isinstance(answer, dict) and "detail" in answer:
        return str(answer["detail"])[:160]
    return ""


class Person(threading.Thread):
    """A user of the soak: ``act`` once per think time until the run ends."""

    def __init__(self, client: Client, rng: random.Random, stop: threading.Event, think: float):
        super().__init__(name=f"soak-{client.name}", daemon=True)
        self.client = client
        self.rng = rng
        self.stop_event = stop
        self.think = think
        self.error: BaseException | None = None

    def run(self) -> None:
        # Users arrive over the first think time, not all in the same second.
        self.stop_event.wait(self.rng.uniform(0, self.think))
        while not self.stop_event.is_set():
            try:
                self.act()
            except Exception as exc:  # a bug of the soak itself: reported, never hidden
                self.error = exc
                self.client.record.violation("soak ran", f"{self.name}: {exc!r}")
                return
            self.stop_event.wait(self.rng.uniform(0.5, 1.5) * self.think)

    def act(self) -> None:
        raise NotImplementedError


class PoolUser(Person):
    def __init__(self, *args, pools: list[int], holders: Holders, **kwargs):
        super().__init__(*args, **kwargs)
        self.pools = pools
        self.holders = holders
        self.vm: int | None = None
        self.job: int | None = None

    def act(self) -> None:
        if self.vm is None:
            pool = self.rng.choice(self.pools)
            status, answer = self.client.call("allocate", "POST", f"vmpools/{pool}/allocatevm/")
            if status == 200:
                self.vm = answer["vm"]["id"]
                self.holders.take(self.vm, self.client.name)
            return
        status, vm = self.client.call("show vm", "GET", f"vms/{self.vm}/")
        if status == 404:
            self.client.record.violation(
                "one holder",
                f"{self.client.name}'s VM {self.vm} answers 404 though nobody returned it",
                self.client.record.history(self.vm),
            )
            self.vm = None
            return
        if status != 200:
            return
        if self.rng.random() < 0.12:
            self.holders.release(self.vm, self.client.name)
            self.client.call("return", "POST", f"vms/{self.vm}/return/")
            self.vm = None
            return
        if self.job is not None and self.rng.random() < 0.3:
            self.client.call("show job", "GET", f"jobs/{self.job}/")
            return
        choices = {
            "up": ["shutdown", "poweroff", "suspend", "console"],
            "down": ["start"],
            "paused": ["resume", "poweroff"],
        }.get(vm["status"], [])
        if not choices:
            return
        action = self.rng.choice(choices)
        if action == "console":
            self.client.call("console ticket", "POST", f"vms/{self.vm}/console/")
            return
        status, job = self.client.call(action, "POST", f"vms/{self.vm}/{action}/")
        if status == 202:
            self.job = job["id"]
            self.client.record.vm(self.vm, f"{self.client.name} asks {action}: job {self.job}")


class LeaseUser(Person):
    def __init__(self, *args, template: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.template = template
        self.lease: int | None = None
        self.reservation: int | None = None
        self.vm: int | None = None
        self.launched = 0

    def act(self) -> None:
        if self.lease is None:
            end = datetime.now(UTC) + timedelta(minutes=self.rng.uniform(1.5, 4))
            status, lease = self.client.call(
                "create lease",
                "POST",
                "leases/",
                {
                    "name": f"{self.client.name}-{int(time.time() * 1000) % 10**9}",
                    "start_date": "now",
                    "end_date": end.strftime("%Y-%m-%d %H:%M"),
                    "reservations": [
                        {
                            "resource_type": "virtual:instance",
                            "vcpus": 1,
                            "memory_mb": 64,
                            "disk_gb": 1,
                            "amount": 1,
                        }
                    ],
                },
            )
            if status == 201:
                self.lease, self.reservation = lease["id"], lease["reservations"][0]["id"]
                self.vm = None
            return
        status, lease = self.client.call("show lease", "GET", f"leases/{self.lease}/")
        if status != 200 or lease["status"] in ("TERMINATED", "ERROR"):
            if status in (200, 404):
                self.lease = None
            return
        roll = self.rng.random()
        if roll < 0.06:
            status, _ = self.client.call("delete lease", "DELETE", f"leases/{self.lease}/")
            if status == 204:
                self.lease = None
        elif roll < 0.16:
            end = datetime.fromisoformat(lease["end_date"]) + timedelta(minutes=1)
            self.client.call(
                "extend lease",
                "PATCH",
                f"leases/{self.lease}/",
                {"end_date": end.strftime("%Y-%m-%d %H:%M")},
            )
        elif lease["status"] == "ACTIVE" and self.vm is None:
            self.launched += 1
            status, vm = self.client.call(
                "launch",
                "POST",
                "vms/",
                {
                    "name": f"{self.client.name}-l{self.lease}-{self.launched}",
                    "template": self.template,
                    "reservation": self.reservation,
                },
            )
            if status == 201:
                self.vm = vm["id"]
                self.client.call("start", "POST", f"vms/{self.vm}/start/")
        elif self.vm is not None:
            status, vm = self.client.call("show vm", "GET", f"vms/{self.vm}/")
            if status == 200 and vm["status"] == "down":
                self.client.call("start", "POST", f"vms/{self.vm}/start/")
            elif status == 200 and vm["status"] == "up" and self.rng.random() < 0.3:
                self.client.call("shutdown", "POST", f"vms/{self.vm}/shutdown/")


class Admin(Person):
    def __init__(self, *args, pools: list[int], clusters: list[int], policies: list[int], **kw):
        super().__init__(*args, **kw)
        self.pools = pools
        self.clusters = clusters
        self.policies = policies

    def act(self) -> None:
        roll = self.rng.random()
        if roll < 0.5:
            cluster = self.clusters[0]  # light hosts cannot migrate
            status, page = self.client.call(
                "list vms", "GET", f"vms/?cluster={cluster}&status=up&limit=50"
            )
            if status == 200 and page["results"]:
                vm = self.rng.choice(page["results"])
                status, job = self.client.call("migrate", "POST", f"vms/{vm['id']}/migrate/", {})
                if status == 202:
                    self.client.record.vm(vm["id"], f"{self.client.name} migrates: job {job['id']}")
        elif roll < 0.8:
            pool = self.rng.choice(self.pools)
            status, found = self.client.call("show pool", "GET", f"vmpools/{pool}/")
            if status == 200:
                prestarted = self.rng.randint(2, max(3, found["size"] // 4))
                self.client.call(
                    "resize pool", "PATCH", f"vmpools/{pool}/", {"prestarted_vms": prestarted}
                )
        elif self.policies:
            self.client.call(
                "change policy",
                "PATCH",
                f"clusters/{self.clusters[0]}/",
                {"policy": self.rng.choice(self.policies)},
            )


class Poller(Person):
    """A script following the event feed with long polls, resuming from its last token."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.token = 0

    def run(self) -> None:
        self.stop_event.wait(self.rng.uniform(0, self.think))
        while not self.stop_event.is_set():
            self.poll()

    def poll(self) -> list[dict]:
        status, answer = self.client.call(
            "event poll",
            "GET",
            f"events/?since={self.token}&timeout={POLL_TIMEOUT_S}",
            timeout=POLL_TIMEOUT_S + REQUEST_TIMEOUT_S,
        )
        if status == 200:
            self.token = answer["token"]
            return answer
        # As the README asks: wait Retry-After (or a moment), plus a random second.
        self.stop_event.wait(self.rng.uniform(1, 3))
        return {}


class FeedReader(Poller):
    """Records every event id it is given, and whether it was told to resync; ``drops``: it
    closes its connection every so often and resumes with its last token a few seconds later."""

    def __init__(self, *args, drops: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.drops = drops
        self.first_token: int | None = None
        self.seen: set[int] = set()
        self.resyncs: list[tuple[int, int]] = []  # (since, token) of answers saying resync

    def run(self) -> None:
        next_drop = time.monotonic() + self.rng.uniform(10, 30)
        while not self.stop_event.is_set():
            since = self.token
            answer = self.poll()
            if not answer:
                continue
            if self.first_token is None:
                self.first_token = since if since else None
                if since == 0:  # the first answer sets where the check starts
                    self.first_token = answer["token"]
                    continue
            self.seen.update(event["id"] for event in answer["events"])
            if answer.get("resync"):
                self.resyncs.append((since, answer["token"]))
            if self.drops and time.monotonic() > next_drop:
                self.client.session.close()
                self.stop_event.wait(self.rng.uniform(2, 8))
                next_drop = time.monotonic() + self.rng.uniform(10, 30)


class StreamReader(Person):
    """A portal page's live stream (server-sent events, with the page's session): it reads
    every event it is sent and, when the stream ends or breaks, reconnects with Last-Event-ID,
    as a browser does. Checked like the feed readers: it misses nothing."""

    def __init__(self, client: Client, rng, stop, think, *, session: str):
        super().__init__(client, rng, stop, think)
        self.drops = True
        self.session = requests.Session()
        self.session.cookies.set(settings.SESSION_COOKIE_NAME, session)
        self.first_token: int | None = None
        self.token = 0
        self.seen: set[int] = set()
        self.resyncs: list[tuple[int, int]] = []

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.listen()

    def listen(self) -> None:
        headers = {"Last-Event-ID": str(self.token)} if self.first_token is not None else {}
        sent = time.monotonic()
        record = self.client.record
        try:
            with self.session.get(
                f"{self.client.base_url}/events/stream/",
                headers=headers,
                stream=True,
                timeout=(10, REQUEST_TIMEOUT_S),
            ) as response:
                record.call(
                    Call("event stream", response.status_code, _ms(sent), sent, self.client.name)
                )
                if response.status_code != 200:
                    if response.status_code >= 500 and not (
                        response.status_code == 503 and response.headers.get("Retry-After")
                    ):
                        record.violation(
                            "well-formed answers",
                            f"event stream as {self.client.name}: {response.status_code}",
                        )
                    self.stop_event.wait(self.rng.uniform(1, 3))
                    return
                self._read(response)
        except requests.RequestException:
            pass  # a broken stream: the browser reconnects with Last-Event-ID
        self.stop_event.wait(1)

    def _read(self, response) -> None:
        since = self.token
        block: dict[str, str] = {}
        for line in response.iter_lines(decode_unicode=True):
            if self.stop_event.is_set():
                return
            if line:
                field_name, _, value = line.partition(":")
                block[field_name] = value.strip()
                continue
            if "id" in block:
                position = int(block["id"])
                if self.first_token is None:
                    self.first_token = position
                elif "data" in block and block.get("event") != "resync":
                    self.seen.add(position)
                self.token = max(self.token, position)
            if block.get("event") == "resync":
                self.resyncs.append((since, 10**12))
            block = {}


def people(
    base_url: str,
    fleet,
    record: Record,
    stop: threading.Event,
    seed: int,
    think: float,
    pollers: int,
) -> tuple[list[Person], list]:
    """Every user of the fleet as a thread (not started), and the feed and stream readers."""
    rng = random.Random(seed)
    holders = Holders(record)
    crowd: list[Person] = []

    def client(user_id: int, token: str, name: str) -> Client:
        return Client(base_url, token, name, record)

    users = sorted(fleet.users.items())
    leasers = max(1, len(users) // 8)
    for index, (user_id, token) in enumerate(users):
        name = f"user-{user_id}"
        common = (client(user_id, token, name), random.Random(rng.random()), stop, think)
        if index < leasers:
            crowd.append(LeaseUser(*common, template=fleet.template))
        elif index < leasers + pollers:
            crowd.append(Poller(*common))
        else:
            crowd.append(PoolUser(*common, pools=fleet.pools, holders=holders))
    admins = sorted(fleet.admins.items())
    readers: list = []
    for index, (user_id, token) in enumerate(admins):
        name = f"admin-{user_id}"
        common = (client(user_id, token, name), random.Random(rng.random()), stop, think)
        if index < 2:
            readers.append(FeedReader(*common, drops=index == 1))
        elif index < 4:
            readers.append(StreamReader(*common, session=fleet.sessions[user_id]))
        else:
            crowd.append(
                Admin(
                    *common, pools=fleet.pools, clusters=fleet.cluster_ids, policies=fleet.policies
                )
            )
    return crowd + readers, readers


Check = Callable[[], None]
