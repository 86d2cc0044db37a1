"""Sizes as people read them: bytes in binary units ("252 GiB", "1.5 GiB", "512 MiB")."""

from __future__ import annotations

UNITS = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"]


def in_binary_units(count: int) -> str:
    """``count`` bytes in the largest unit that keeps a whole part: a decimal under 10 (but
    none when it is .0), none from 10 up ("251.97" is "252 GiB")."""
    value, unit = float(count), 0
    while value >= 1024 and unit < len(UNITS) - 1:
        value, unit = value / 1024, unit + 1
    if unit == 0:
        return "1 byte" if count == 1 else f"{count} bytes"
    shown = f"{value:.1f}".removesuffix(".0") if value < 10 else f"{value:.0f}"
    return f"{shown} {UNITS[unit]}"


def mib_in_binary_units(mib: int) -> str:
    """A size given in MiB (memory), as ``in_binary_units`` says it: 3072 is "3 GiB"."""
    return in_binary_units(mib * 1024**2)
