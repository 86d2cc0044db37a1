"""A job's result as its admin page shows it: the placement decision ("why this host") as a
table of hosts, each with its verdict and the reason, and the rest of the result as named
values rather than a JSON blob."""

from __future__ import annotations

import json

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

OUTCOMES = {
    "placed": "Placed by policy {policy} in {seconds} s.",
    "stayed": "Policy {policy} keeps the VM where it is (decided in {seconds} s).",
    "no_host": "No host could take the VM under policy {policy} (decided in {seconds} s).",
    "busy": "The cluster's scheduler was busy: no decision was made.",
}
RANKING = (
    "Hosts that fit are ranked by their weighed total, lowest first; a tie goes to the host "
    "added first."
)
# The result's keys that name the host a placement ended on.
CHOSEN_KEYS = ("host", "to", "stayed")


def result_html(result) -> SafeString | str:
    """The job's result in words: the placement's table first, then each other value."""
    if not result:
        return "—"
    if not isinstance(result, dict):
        return _value(result)
    parts = []
    placement = result.get("placement")
    shown = dict(result)
    if isinstance(placement, dict):
        parts.append(placement_html(placement, _chosen(result), result.get("attempts") or []))
        shown.pop("placement")
        shown.pop("attempts", None)
    if shown:
        parts.append(
            format_html(
                '<dl class="job-result">{}</dl>',
                format_html_join(
                    "", "<dt>{}</dt><dd>{}</dd>", ((_name(k), _value(v)) for k, v in shown.items())
                ),
            )
        )
    return format_html_join("", "{}", ((part,) for part in parts))


def _chosen(result: dict) -> str | None:
    return next((result[key] for key in CHOSEN_KEYS if isinstance(result.get(key), str)), None)


def placement_html(placement: dict, chosen: str | None, attempts: list) -> SafeString:
    """Why each host was chosen, tried, ranked or ruled out: a table of host, verdict, reason,
    under a line saying how the decision ended."""
    rows = _placement_rows(placement, chosen, attempts)
    summary = OUTCOMES.get(placement.get("outcome"), "Placed by policy {policy}.").format(
        policy=placement.get("policy", "?"), seconds=f"{placement.get('seconds', 0):.3f}"
    )
    notes = [summary]
    if placement.get("scores"):
        notes.append(RANKING)
    for unit in placement.get("skipped_units") or []:
        notes.append(f"{unit.get('unit')} failed ({unit.get('error')}): {unit.get('outcome')}.")
    if placement.get("disabled_units"):
        notes.append(f"Disabled, so not asked: {', '.join(placement['disabled_units'])}.")
    return format_html(
        '<div class="job-placement"><p>{}</p>'
        "<table><thead><tr><th>host</th><th>verdict</th><th>reason</th></tr></thead>"
        "<tbody>{}</tbody></table></div>",
        " ".join(notes),
        format_html_join(
            "",
            '<tr data-host="{}"><td>{}</td><td>{}</td><td>{}</td></tr>',
            ((host, host, verdict, reason) for host, verdict, reason in rows),
        ),
    )


def _placement_rows(placement: dict, chosen: str | None, attempts: list) -> list[tuple]:
    """(host, verdict, reason), the chosen host first, then the others that fit in their
    order, then those a try failed on, then those the filters ruled out."""
    order = list(placement.get("order") or [])
    scores = placement.get("scores") or {}
    if chosen is None and order and placement.get("outcome") in ("placed", "stayed"):
        chosen = order[0]
    failed = {
        a.get("host"): a.get("reason", "")
        for a in attempts
        if isinstance(a, dict) and a.get("outcome") == "failed"
    }
    rows = []
    if chosen is not None:
        rows.append((chosen, "Chosen", _weighed(scores.get(chosen))))
    for rank, host in enumerate(order, start=1):
        if host != chosen and host not in failed:
            rows.append((host, f"Fits (ranked {rank})", _weighed(scores.get(host))))
    rows += [(host, "Tried, failed", reason) for host, reason in failed.items()]
    for step in placement.get("filters") or []:
        for host, why in (step.get("removed") or {}).items():
            rows.append((host, "Ruled out", f"{why} ({step.get('unit')})"))
    return rows


def _weighed(score) -> str:
    """A host's weighed total and each weight's part of it: "total 1: Memory rank 1 × 1"."""
    if not isinstance(score, dict) or not score.get("units"):
        return "Passed every filter."
    parts = ", ".join(
        f"{unit} rank {part.get('rank')} × {part.get('factor'):g}"
        for unit, part in score["units"].items()
    )
    return f"Total {score.get('total', 0):g}: {parts}."


def _name(key: str) -> str:
    return key.replace("_", " ").capitalize()


def _value(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "—"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, ensure_ascii=False)
