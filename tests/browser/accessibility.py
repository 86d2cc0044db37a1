"""What the browser tests check on any portal page: axe-core's accessibility rules, sideways
scrolling on a small screen, and a visible focus on every control a keyboard reaches.

axe-core comes from npm (tests/browser/package.json, installed by `make browser-packages`). It is
evaluated through the DevTools protocol, which the page's Content-Security-Policy does not
govern, so the policy the tests check stays the product's own.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1366, "height": 768}
# The impacts a page may not have: what keeps someone from using it at all, or nearly.
BLOCKING_IMPACTS = {"serious", "critical"}

RUN_AXE = """
async (options) => {
  const results = await axe.run(document, {resultTypes: ["violations"], ...options});
  return results.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ") + ": " + n.failureSummary),
  }));
}
"""

# The controls a keyboard user must be able to reach (``tabStops()``), each named by its place
# among them and its text, so that one re-rendered by a live refresh keeps its name.
TAB_STOPS = """
window.tabStops = () => Array.from(document.querySelectorAll(
  'a[href], button:not([disabled]), input:not([disabled]):not([type="hidden"]), ' +
  'select:not([disabled]), textarea:not([disabled]), summary, [tabindex]:not([tabindex="-1"])'
)).filter((el) => (el.checkVisibility() || el.getBoundingClientRect().width > 0) &&
  !el.closest("[inert]") && el.tabIndex >= 0);
window.describe = (el) => tabStops().indexOf(el) + " " + el.tagName.toLowerCase() + " " +
  (el.id ? "#" + el.id + " " : "") +
  (el.getAttribute("href") || el.textContent.trim().slice(0, 40));
true;  // not the function above, which Playwright would call
"""
# How a control shows it has the focus: its outline or shadow (an SVG link: its shape's stroke).
FOCUS_LOOK = """
(el) => { const s = getComputedStyle(el);
  const shape = el instanceof SVGElement ? el.querySelector("rect, circle, path") : null;
  const stroke = shape ? getComputedStyle(shape).stroke + getComputedStyle(shape).strokeWidth : "";
  const outlined = s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0;
  return [outlined ? s.outlineStyle + s.outlineWidth + s.outlineColor : "",
          s.boxShadow === "none" ? "" : s.boxShadow, stroke].join("|"); }
"""
# Where the walk starts: before the page's first control, whatever had the focus.
START_AT_THE_TOP = """
() => { const start = document.createElement("span");
  start.tabIndex = -1; document.body.prepend(start); start.focus(); window.scrollTo(0, 0); }
"""
# Live refreshes wait during the walk: one re-rendering the focused control would end it.
PAUSE_REFRESHES = """
() => document.body.addEventListener("htmx:beforeRequest", (event) => event.preventDefault())
"""


@cache
def _axe_source() -> str:
    if not AXE.exists():
        raise AssertionError(f"{AXE} is missing: install it with `make browser-packages`")
    return AXE.read_text()


def blocking_violations(page, options: dict | None = None) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now, one line each
    (``options`` go to ``axe.run``)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(_axe_source())
    found = page.evaluate(RUN_AXE, options or {})
    return [
        f"{v['impact']} {v['id']} ({v['help']}): " + "; ".join(v["nodes"])
        for v in found
        if v["impact"] in BLOCKING_IMPACTS
    ]


def sideways_scroll(page) -> int:
    """How many pixels the page is wider than the window (0 when it does not scroll sideways)."""
    return page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )


def keyboard_gaps(page) -> list[str]:
    """Tab through the page from its top: the controls Tab never reached, and those that got
    the focus with no visible sign of it (their outline and shadow as when unfocused)."""
    page.evaluate(TAB_STOPS)
    controls = page.evaluate("tabStops().map(describe)")
    page.evaluate(PAUSE_REFRESHES)
    page.evaluate(START_AT_THE_TOP)
    reached, unseen = [], []
    # A date and time field takes several Tabs (one per part), hence the margin.
    for _ in range(3 * len(controls) + 5):
        page.keyboard.press("Tab")
        focused = page.evaluate_handle("document.activeElement")
        name = page.evaluate("(el) => el && el !== document.body ? describe(el) : null", focused)
        if reached and name == reached[-1]:
            continue
        if name is None or name in reached:
            break
        reached.append(name)
        focused_look = page.evaluate(FOCUS_LOOK, focused)
        page.evaluate("(el) => el.blur()", focused)
        resting_look = page.evaluate(FOCUS_LOOK, focused)
        page.evaluate("(el) => el.focus({focusVisible: true})", focused)
        if not focused_look.strip("|") or focused_look == resting_look:
            unseen.append(f"{name} shows no focus")
    missed = [f"{name} never gets the focus" for name in controls if name not in reached]
    return missed + unseen


def too_wide(page, limit: int = 3) -> list[str]:
    """The deepest elements reaching past the window's right edge: what makes a page scroll."""
    return page.evaluate(
        """(limit) => {
          const width = document.documentElement.clientWidth;
          const past = Array.from(document.body.querySelectorAll("*")).filter(
            (el) => el.getBoundingClientRect().right > width + 1 &&
              !Array.from(el.children).some((c) => c.getBoundingClientRect().right > width + 1));
          return past.slice(0, limit).map((el) => el.tagName.toLowerCase() +
            (el.id ? "#" + el.id : "") + (el.className && el.className.baseVal === undefined ?
            "." + el.className.trim().split(/\\s+/).join(".") : ""));
        }""",
        limit,
    )
