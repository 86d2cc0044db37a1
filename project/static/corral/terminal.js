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
socket.addEventListener("close", () => {
  status.textContent = opened
    ? "Disconnected. Open the terminal again from the VM's page."
    : "The terminal could not be reached (the ticket may have expired or been used).";
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
