"""The soak's report: operations by kind and outcome, faults by kind, each call's p50/p95
during faults and outside them, recovery after each kind of fault, and every violation with its
history. ``build`` makes it (a JSON-ready dict), ``text`` prints it."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

# A 503 is allowed only while the database is down: from a restart's start until the API
# answered again, plus this much (the answer may be read a moment later).
DB_DOWN_GRACE_S = 5


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def _window(fault) -> tuple[float, float]:
    end = fault.ended if fault.ended is not None else fault.began
    return fault.began, end


def build(*, record, faults, began, ended, settle, settings, samples) -> dict:
    windows = [_window(f) for f in faults]
    db_down = [
        (f.began, (f.ended or f.began) + (f.recovery_s or 0) + DB_DOWN_GRACE_S)
        for f in faults
        if f.kind == "restart PostgreSQL"
    ]

    def during(at: float, spans) -> bool:
        return any(start <= at <= end for start, end in spans)

    def overlaps(sent: float, answered: float, spans) -> bool:
        """The call was under way while the database was down (sent just before a restart
        and cut off by it, or sent while it was down)."""
        return any(sent <= end and answered >= start for start, end in spans)

    outcomes: dict[str, Counter] = defaultdict(Counter)
    times: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for call in record.calls:
        outcomes[call.kind][str(call.status) if call.status else "no answer"] += 1
        if call.status is None:
            record.violation(
                "every call answered",
                f"{call.kind} by {call.user} at {call.at - began:.1f} s had no answer "
                f"({call.note}) after {call.ms:.0f} ms",
            )
            continue
        if call.status == 503 and not overlaps(call.at, call.at + call.ms / 1000, db_down):
            record.violation(
                "503 only while the database is down",
                f"{call.kind} by {call.user} at {call.at - began:.1f} s: 503 {call.note}",
            )
        if call.kind == "event poll":
            continue  # a long poll's time is its wait
        times[call.kind]["faults" if during(call.at, windows) else "calm"].append(call.ms)
    latency = {
        kind: {
            when: {"calls": len(v), "p50_ms": _percentile(v, 0.5), "p95_ms": _percentile(v, 0.95)}
            for when, v in sorted(split.items())
            if v
        }
        for kind, split in sorted(times.items())
    }
    by_kind: dict[str, list] = defaultdict(list)
    for fault in faults:
        by_kind[fault.kind].append(fault)

    def alone(fault) -> bool:
        """No other fault struck from this one's start until it had recovered."""
        end = (fault.ended or fault.began) + (fault.recovery_s or 0)
        return not any(
            other is not fault
            and other.began <= end
            and (other.ended or other.began) >= fault.began
            for other in faults
        )

    recovery = {}
    for kind, done in sorted(by_kind.items()):
        measured = [f.recovery_s for f in done if f.recovery_s is not None]
        single = [f.recovery_s for f in done if f.recovery_s is not None and alone(f)]
        recovery[kind] = {
            "faults": len(done),
            "recovered": sum(1 for f in done if f.recovered),
            "median_s": round(statistics.median(measured), 1) if measured else None,
            "max_s": round(max(measured), 1) if measured else None,
            # Of the faults no other overlapped: what this kind alone costs.
            "alone": len(single),
            "alone_max_s": round(max(single), 1) if single else None,
        }
    return {
        "settings": settings,
        "seconds": round(ended - began, 1),
        "calls": len(record.calls),
        "operations": {kind: dict(counts) for kind, counts in sorted(outcomes.items())},
        "faults": [
            {
                "kind": f.kind,
                "at_s": round(f.began - began, 1),
                "lasted_s": round((f.ended or f.began) - f.began, 1),
                "detail": f.detail,
                "recovery_s": round(f.recovery_s, 1) if f.recovery_s is not None else None,
            }
            for f in faults
        ],
        "recovery": recovery,
        "latency": latency,
        "settle_s": settle,
        "watcher_samples": samples,
        "violations": [
            {
                "invariant": v.invariant,
                "at_s": round(v.at - began, 1),
                "what": v.what,
                "history": v.history,
            }
            for v in record.violations
        ],
    }


def text(report: dict) -> str:
    s = report["settings"]
    lines = [
        f"Soak: {report['seconds']:.0f} s, {s['users']} users, {report['calls']} calls, "
        f"{len(report['faults'])} faults (seed {s['seed']})",
        "",
        "Operations (kind: answers by status):",
    ]
    for kind, counts in report["operations"].items():
        shown = ", ".join(f"{status} x{n}" for status, n in sorted(counts.items()))
        lines.append(f"  {kind:16} {shown}")
    lines += ["", "Latency, p50 / p95 ms (outside faults | during faults):"]
    for kind, split in report["latency"].items():
        calm, rough = split.get("calm"), split.get("faults")
        left = f"{calm['p50_ms']:7.1f} / {calm['p95_ms']:7.1f}" if calm else " " * 17
        right = f"{rough['p50_ms']:7.1f} / {rough['p95_ms']:7.1f}" if rough else ""
        lines.append(f"  {kind:16} {left} | {right}")
    lines += [
        "",
        "Faults and recovery (count, recovered, median / max seconds; max of those no other",
        "fault overlapped):",
    ]
    for kind, r in report["recovery"].items():
        median = "-" if r["median_s"] is None else f"{r['median_s']:.1f}"
        worst = "-" if r["max_s"] is None else f"{r['max_s']:.1f}"
        single = "-" if r["alone_max_s"] is None else f"{r['alone_max_s']:.1f} ({r['alone']})"
        lines.append(
            f"  {kind:32} {r['faults']:3} {r['recovered']:3}   {median} / {worst}   {single}"
        )
    lines += ["", f"Settled after the faults (s): {report['settle_s']}", ""]
    if report["violations"]:
        lines.append(f"VIOLATIONS: {len(report['violations'])}")
        for v in report["violations"]:
            lines.append(f"  [{v['invariant']}] at {v['at_s']} s: {v['what']}")
            lines.extend(f"      {h}" for h in v["history"][-12:])
    else:
        lines.append("No invariant was broken.")
    return "\n".join(lines)
