// The VM's serial terminal page: xterm.js (vendored, see project/static/vendor/xterm-5.5.0) on
// the websocket URL the page was given with its one-time ticket. The websocket carries the
// terminal's raw bytes both ways in binary frames.
import { openTerminal } from "./xterm_box.js";

const box = document.getElementById("terminal-screen");
const status = document.getElementById("terminal-status");
const term = openTerminal(box, { cursorBlink: true, fit: true });
const socket = new WebSocket(box.dataset.url, ["binary"]);
socket.binaryType = "arraybuffer";
const encoder = new TextEncoder();
let opened = false;

socket.addEventListener("open", () => {
  opened = true;
  status.textContent = "Connected";
  term.focus();
});
socket.addEventListener("message", (event) => {
  term.write(typeof event.data === "string" ? event.data : new Uint8Array(event.data));
});
// Close codes of the relay (hosts/guests/serial_relay.py): 4502, the guest's console could not
// be opened (the reason says why, in words). A refused ticket refuses the websocket itself.
const NOT_OPENED = 4502;
socket.addEventListener("close", (event) => {
  if (event.code === NOT_OPENED) {
    status.textContent = `${event.reason || "The guest's serial console could not be opened."} Open the terminal again from the VM's page to retry.`;
  } else if (opened) {
    status.textContent = "Disconnected. Open the terminal again from the VM's page.";
  } else {
    status.textContent =
      "The terminal's ticket was refused: it is used once, within seconds. Open the terminal again from the VM's page.";
  }
  term.options.disableStdin = true;
});

function send(bytes) {
  if (socket.readyState === WebSocket.OPEN) {
    socket.send(bytes);
  }
}
term.onData((data) => send(encoder.encode(data)));
// Bytes xterm.js reports outside UTF-8 (some mouse reports): one byte per character.
term.onBinary((data) => send(Uint8Array.from(data, (c) => c.charCodeAt(0) & 0xff)));
