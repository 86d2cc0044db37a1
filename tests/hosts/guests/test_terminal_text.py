"""The serial log as plain text for pages without scripts: escape sequences go, text stays."""

import pytest

from hosts.guests.terminal_text import plain_text


@pytest.mark.parametrize(
    ("shown", "plain"),
    [
        ("\x1b[1;32mgreen\x1b[0m text", "green text"),  # SGR colours
        ("ask\x1b[6n where", "ask where"),  # a cursor position request
        ("\x1b[?25l\x1b[2J\x1b[Hcleared", "cleared"),  # private modes, clear, home
        ("\x1b]0;a title\x07prompt", "prompt"),  # OSC ended by BEL
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),  # OSC ended by ST
        ("\x1bPq#0;2;0;0;0\x1b\\after", "after"),  # DCS (sixel)
        ("\x1bc\x1b7saved\x1b8\x1b(B", "saved"),  # reset, save/restore cursor, charset
        ("cut off \x1b]0;never ended", "cut off "),  # an OSC the log's tail cut
        ("bell\x07 and\x08 back\x7f", "bell and back"),  # other control characters
        ("line 1\r\nline 2\r\n\tindented\n", "line 1\nline 2\n\tindented\n"),
        ("é ✓ 日本", "é ✓ 日本"),
    ],
)
def test_escape_sequences_and_controls_go_and_text_stays(shown, plain):
    assert plain_text(shown) == plain
