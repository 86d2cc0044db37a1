"""The handshake the console relay makes with the browser: the RFB versions noVNC and other
viewers speak, bytes arriving in any chunks, and what it refuses (the screen's side is proven
against real QEMU in test_guest_access.py)."""

import pytest

from hosts.guests.rfb import BrowserHandshake, HandshakeFailed


def test_rfb_3_8_is_offered_no_security_and_confirmed():
    handshake = BrowserHandshake()
    assert handshake.greeting() == b"RFB 003.008\n"

    assert handshake.feed(b"RFB 003.008\n") == b"\x01\x01"
    assert handshake.feed(b"\x01") == b"\0\0\0\0"
    assert handshake.done and handshake.rest == b""


def test_bytes_in_any_chunks_and_what_follows_the_handshake_goes_to_the_screen():
    handshake = BrowserHandshake()
    answers = [handshake.feed(bytes([byte])) for byte in b"RFB 003.008"]

    assert answers == [b""] * 11 and not handshake.done
    assert handshake.feed(b"\n\x01\x01") == b"\x01\x01\0\0\0\0"  # its choice, then ClientInit
    assert handshake.done and handshake.rest == b"\x01"


@pytest.mark.parametrize(
    ("version", "answer"),
    [
        (b"RFB 003.003\n", b"\0\0\0\x01"),  # 3.3: the server names the type; nothing follows
        (b"RFB 003.889\n", b"\x01\x01"),  # Apple's, read as 3.8
    ],
)
def test_older_and_other_versions(version, answer):
    handshake = BrowserHandshake()

    assert handshake.feed(version) == answer
    if not handshake.done:
        assert handshake.feed(b"\x01") == b"\0\0\0\0"
    assert handshake.done


def test_rfb_3_7_gets_no_security_result_for_none():
    handshake = BrowserHandshake()
    handshake.feed(b"RFB 003.007\n")

    assert handshake.feed(b"\x01") == b""
    assert handshake.done


@pytest.mark.parametrize("sent", [b"GET / HTTP/1.1\r\n", b"RFB 004.000\n"])
def test_what_is_not_rfb_3_is_refused(sent):
    with pytest.raises(HandshakeFailed, match="does not speak RFB"):
        BrowserHandshake().feed(sent)


def test_a_security_type_not_offered_is_refused():
    handshake = BrowserHandshake()
    handshake.feed(b"RFB 003.008\n")

    with pytest.raises(HandshakeFailed, match="chose security type 2"):
        handshake.feed(b"\x02")
