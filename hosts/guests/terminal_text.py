"""A serial console's output as plain text: what a terminal would show, without the escape
sequences that move its cursor, colour its text or ask it questions (for the VM page's log
when no script renders them)."""

from __future__ import annotations

import re

# ECMA-48 escape sequences: CSI (ESC [ parameters, intermediates, a final byte), OSC (ESC ]
# up to BEL or ST), the string sequences DCS, SOS, PM, APC (up to ST), and the other ESC
# sequences (ESC, intermediates, a final byte). An OSC or string cut off by the end of the
# text is dropped to its end.
ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\|$)"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\|$)"
    r"|\x1b[ -/]*[0-~]"
)
# Control characters a page cannot show (tabs and line ends stay; a carriage return that does
# not end a line goes, as a terminal would overwrite nothing visible with it here).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def plain_text(text: str) -> str:
    """``text`` (a terminal's output) without escape sequences or other control characters,
    with CRLF line ends as LF."""
    text = text.replace("\r\n", "\n")
    return CONTROL.sub("", ESCAPE_SEQUENCE.sub("", text))
