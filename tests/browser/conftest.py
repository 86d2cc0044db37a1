"""Fixtures for the browser tests: Debian's Chromium, driven by Playwright, against a live
server on the test database, with the simulated hosts and a real task cluster running the jobs.

Every page fails its test on a JavaScript error (an uncaught exception, a console error, a
server error answering any request) or on anything the Content-Security-Policy blocked, and
leaves a screenshot in var/browser-failures/ when its test fails.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from hosts.models import Job, VmStatus
from hosts.models.jobs import ACTIVE_JOB_STATES
from pools import services
from pools.models import VmPool
from tests.conftest import unique, wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "pw-Corral-1"  # what tests.conftest.make_user gives every user
VM_START_MS = 30_000  # how long a VM may take to come up on a simulated host
STREAM_SECONDS = 2.0  # how long one event-stream response lasts in these tests
REPO = Path(__file__).resolve().parents[2]
FAILURES_DIR = REPO / "var" / "browser-failures"

# What Chromium logs for a request answered with an error status (see BrowserErrors).
FAILED_LOAD = re.compile(r"^Failed to load resource: the server responded with a status of 4\d\d")
# Reports each Content-Security-Policy violation of a page (and its frames) to the test, from
# before the page's own scripts run; Playwright's init scripts are not subject to the policy.
REPORT_CSP_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.corralCspViolation({
    directive: event.effectiveDirective,
    blocked: event.blockedURI,
    source: event.sourceFile,
    line: event.lineNumber,
    sample: event.sample,
    disposition: event.disposition,
  });
});
"""


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test item, for the screenshot on failure."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test that passed still fails when a page it drove had a JavaScript error or a
    Content-Security-Policy violation."""
    result = yield
    watcher = getattr(item, "browser_errors", None)
    errors = watcher.errors() if watcher else []
    if errors:
        raise AssertionError("JavaScript errors in the browser:\n" + "\n".join(errors))
    return result


class BrowserErrors:
    """What went wrong in the pages of one test: uncaught exceptions, console errors,
    Content-Security-Policy violations, and server errors answering any request.

    A violation is reported twice, as a console error and as a ``securitypolicyviolation``
    event (with the directive and what was blocked); either one fails the test.

    Chromium also logs a console error for every response with an error status; those are no
    script errors when the response was a page (a 404 page the test asked for) or a 404 that
    tells htmx where to go instead. The console message and the response may arrive in either
    order, so they are matched up at the end.
    """

    def __init__(self) -> None:
        self.found: list[str] = []
        self.failed_loads: list[tuple[str, str]] = []  # (resource URL, what the page logged)
        self.expected_failures: set[str] = set()
        self.csp_violations: list[dict] = []
        self.pages: list = []  # every page watched, in the order they opened

    def watch_context(self, context) -> None:
        """Watch every page of ``context``: those it opens later too (a form with
        ``target="_blank"`` opens a tab), from before their own scripts run."""

        def on_csp_violation(source, violation):
            self.csp_violations.append(violation)
            self.found.append(
                f"{source['frame'].url}: Content-Security-Policy violation: "
                f"{violation['directive']} blocked {violation['blocked'] or 'inline'}"
                f" ({violation['source']}:{violation['line']}) {violation['sample']!r}"
            )

        context.expose_binding("corralCspViolation", on_csp_violation)
        context.add_init_script(REPORT_CSP_VIOLATIONS)
        context.on("page", self.watch)

    def watch(self, page) -> None:
        """Watch one page (once, however often it is asked)."""
        if page in self.pages:
            return
        self.pages.append(page)

        def on_console(message):
            if message.type != "error":
                return
            where = message.location.get("url", "")
            text = f"{page.url}: console error: {message.text} ({where})"
            if FAILED_LOAD.match(message.text):
                self.failed_loads.append((where, text))
            else:
                self.found.append(text)

        def on_response(response):
            if response.status >= 500:
                self.found.append(f"{response.url} answered {response.status}")
            elif response.status >= 400 and (
                response.request.resource_type == "document" or "hx-redirect" in response.headers
            ):
                self.expected_failures.add(response.url)

        page.on("pageerror", lambda exc: self.found.append(f"{page.url}: uncaught {exc}"))
        page.on("console", on_console)
        page.on("response", on_response)

    def errors(self) -> list[str]:
        unexpected = [text for url, text in self.failed_loads if url not in self.expected_failures]
        return self.found + unexpected


@pytest.fixture(scope="package")
def _orm_beside_playwright():
    """Playwright's sync API keeps an event loop running on the test's thread, which Django's
    ORM takes for an async context; the test code itself stays synchronous. Only while the
    browser tests run."""
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if before is None:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture(scope="package")
def browser(_orm_beside_playwright):
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (make browser-packages)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


def _wait_for_requests_to_end(timeout: float = 10.0) -> None:
    """Wait until the live server has answered every request (event streams included), so
    none of them reaches for the database once the test has given it back."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(
        thread.name.endswith("(process_request_thread)") for thread in threading.enumerate()
    ):
        time.sleep(0.05)


@contextlib.contextmanager
def _pages_on(browser, base_url: str, request):
    """open_page(same_session_as=None, viewport=None) on the server at ``base_url`` (in a
    new session, its pages and the tabs they open ``viewport`` in size, if given);
    screenshots of every page (tabs the pages opened too) when the test failed, and the
    contexts closed after."""
    watcher = request.node.browser_errors = BrowserErrors()
    contexts = []

    def open_page(same_session_as=None, viewport=None):
        if same_session_as is None:
            sized = {"viewport": viewport} if viewport else {}
            context = browser.new_context(base_url=base_url, **sized)
            context.set_default_timeout(10_000)
            watcher.watch_context(context)
            contexts.append(context)
        else:
            context = same_session_as.context
        page = context.new_page()
        watcher.watch(page)
        return page

    yield open_page
    report = getattr(request.node, "report_call", None)
    if report is None or report.failed:
        name = re.sub(r"[^\w.-]+", "_", request.node.name)
        pages = watcher.pages
        for number, page in enumerate(pages, 1):
            if not page.is_closed():
                FAILURES_DIR.mkdir(parents=True, exist_ok=True)
                suffix = f"-{number}" if len(pages) > 1 else ""
                page.screenshot(path=FAILURES_DIR / f"{name}{suffix}.png", full_page=True)
    for context in contexts:
        context.close()


@pytest.fixture
def new_page(browser, live_server, settings, request):
    """new_page(same_session_as=None) -> a page on the live server, in a fresh browser context
    (its own cookies) or as another tab of the given page's session.

    Script errors on any of them fail the test (BrowserErrors); a failed test leaves a
    screenshot of each.
    """
    # Short event-stream responses (the browser resumes each from its last event), so that
    # none outlives the test by more than that.
    settings.CORRAL_EVENT_STREAM_SECONDS = STREAM_SECONDS
    with _pages_on(browser, live_server.url, request) as open_page:
        yield open_page
    _wait_for_requests_to_end()


@pytest.fixture
def asgi_pages(browser, asgi_server, collected_static, request):
    """asgi_pages(**env) -> (server, open_page): the production web tier (gunicorn with
    uvicorn workers, DEBUG off, its static files collected) on the test database, and
    ``open_page`` as ``new_page`` gives it, on that server. For pages that need what Django's
    live server does not serve: websockets (the VM console)."""
    with contextlib.ExitStack() as stack:

        def start(**env):
            env.setdefault("CORRAL_EVENT_STREAM_SECONDS", STREAM_SECONDS)
            server = asgi_server(SECURE_COOKIES="0", STATIC_ROOT=collected_static, **env)
            return server, stack.enter_context(_pages_on(browser, server.url, request))

        yield start


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory):
    """A STATIC_ROOT as `make serve` collects it (links to the files), for the web servers the
    tests start with DEBUG off."""
    root = tmp_path_factory.mktemp("static")
    environ = dict(os.environ, DJANGO_SETTINGS_MODULE="project.test_settings")
    environ["STATIC_ROOT"] = str(root)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--link", "-v", "0"],
        cwd=REPO,
        env=environ,
        check=True,
        timeout=120,
    )
    return root


@pytest.fixture
def page(new_page):
    """One browser page on the live server (see ``new_page``)."""
    return new_page()


def log_in(page, user, password: str = PASSWORD) -> None:
    """Log in through the login form and land on the portal's first page."""
    page.goto("/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#username")).to_have_text(user.username)


@pytest.fixture
def running_tasks(task_cluster, tmp_path):
    """running_tasks(starts_wait_for=None) -> a task cluster on the test database; with
    ``starts_wait_for`` (a path), every VM start first runs a hook that waits until that file
    exists (at most VM_START_MS), so that a test sees a start midway however loaded the
    machine is, and lets it finish by creating the file."""

    def start(starts_wait_for: Path | None = None):
        hooks = tmp_path / "hooks"
        if starts_wait_for is not None:
            folder = hooks / "vm-pre-start"
            folder.mkdir(parents=True)
            script = folder / "50-wait"
            tenths = VM_START_MS // 100
            script.write_text(
                f"#!/bin/sh\nfor _ in $(seq {tenths}); do\n"
                f"  [ -e '{starts_wait_for}' ] && exit 0; sleep 0.1\ndone\n"
            )
            script.chmod(0o755)
        # A short-lived ticker, so that stopping the cluster does not wait for a long one.
        return task_cluster(CORRAL_HOOKS_DIR=hooks, CORRAL_TICKER_RUN_SECONDS=1)

    return start


@pytest.fixture
def sim_pool(sim_cluster, make_template):
    """sim_pool(size, prestarted_vms, **fields) -> a pool on the simulated hosts, created as
    the API creates it (its VMs' prepare jobs and the prestart monitor queued)."""

    def make(size: int, prestarted_vms: int = 0, **fields) -> VmPool:
        template = make_template(memory_mb=128, vcpus=1, disk_gb=1, cluster=sim_cluster)
        pool = VmPool(
            name=fields.pop("name", unique("lab")),
            cluster=sim_cluster,
            template=template,
            size=size,
            prestarted_vms=prestarted_vms,
            **fields,
        )
        pool.full_clean()
        return services.create_pool(pool)

    return make


def wait_until_ready(pool: VmPool, cluster) -> None:
    """Wait until the task cluster has prepared the pool's VMs and started its prestarted ones
    (no job left running on them)."""

    def ready() -> bool:
        up = services.unassigned(pool).filter(status=VmStatus.UP).count()
        busy = Job.objects.filter(vm__pool=pool, state__in=ACTIVE_JOB_STATES).exists()
        return up >= pool.prestarted_vms and not busy

    wait_until(ready, timeout=VM_START_MS / 1000, message=lambda: cluster.log()[-3000:])
