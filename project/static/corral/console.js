// The VM console page: noVNC (vendored, see project/static/vendor/novnc-1.7.0) on the
// websocket URL the page was given with its one-time ticket, and its toolbar.
import RFB from "../vendor/novnc-1.7.0/core/rfb.js";
import KeyTable from "../vendor/novnc-1.7.0/core/input/keysym.js";
import keysyms from "../vendor/novnc-1.7.0/core/input/keysymdef.js";
import Keyboard from "../vendor/novnc-1.7.0/core/input/keyboard.js";

const screen = document.getElementById("console-screen");
// What goes full screen: the screen with its toolbar, so the buttons stay at hand there.
const frame = document.getElementById("console-frame");
const status = document.getElementById("console-status");
const toolbar = document.getElementById("console-toolbar");
const scale = document.getElementById("console-scale");
const fullScreen = document.getElementById("console-fullscreen");
const pasteForm = document.getElementById("console-paste");
const pasteText = document.getElementById("console-paste-text");
const panHint = document.getElementById("console-pan-hint");
const keyboardButton = document.getElementById("console-keyboard");
const keysInput = document.getElementById("console-keys");

const rfb = new RFB(screen, screen.dataset.url);
rfb.viewOnly = false; // keys and the mouse go to the guest
rfb.focusOnClick = true;
// At actual size the screen is clipped to its box, and dragging it pans it while it is larger.
rfb.clipViewport = true;
rfb.addEventListener("clippingviewport", (event) => {
  rfb.dragViewport = event.detail;
});

function setPressed(button, pressed) {
  button.setAttribute("aria-pressed", pressed ? "true" : "false");
}

// Scaled to fit, or at actual size. A phone starts at actual size: scaled into 390 px a guest's
// screen is too small to read. A wider window starts scaled. Whoever switches gets that again in
// this browser next time.
const VIEW_SETTING = "corral.console.scaled";
function showScaled(scaled) {
  rfb.scaleViewport = scaled;
  setPressed(scale, scaled);
  panHint.hidden = scaled;
}
const remembered = localStorage.getItem(VIEW_SETTING);
showScaled(
  remembered === null ? !window.matchMedia("(max-width: 48rem)").matches : remembered === "true",
);

rfb.addEventListener("connect", () => {
  status.textContent = "Connected";
  toolbar.disabled = false;
  rfb.focus();
});
rfb.addEventListener("disconnect", (event) => {
  status.textContent = event.detail.clean
    ? "Disconnected. Open the console again from the VM's page."
    : "The console could not be reached (the ticket may have expired or been used).";
  toolbar.disabled = true;
});

document.getElementById("console-cad").addEventListener("click", () => {
  rfb.sendCtrlAltDel();
  rfb.focus();
});

scale.addEventListener("click", () => {
  showScaled(!rfb.scaleViewport);
  localStorage.setItem(VIEW_SETTING, String(rfb.scaleViewport));
  rfb.focus();
});

fullScreen.addEventListener("click", () => {
  if (document.fullscreenElement) {
    document.exitFullscreen();
  } else {
    frame.requestFullscreen().then(() => rfb.focus());
  }
});
document.addEventListener("fullscreenchange", () => {
  setPressed(fullScreen, document.fullscreenElement === frame);
});

// Keys for characters a keyboard types with one key; everything else is its keysym
// (keysymdef: the character's X11 keysym, Unicode's otherwise), as Proxmox's console does.
const SPECIAL = { "\n": KeyTable.XK_Return, "\r": KeyTable.XK_Return, "\t": KeyTable.XK_Tab };

// Characters a (US) keyboard types with Shift held: QEMU turns a keysym into the key that
// carries it, and that key gives the shifted character only while Shift is down.
const SHIFTED = /[A-Z~!@#$%^&*()_+{}|:"<>?]/;

export function typeText(text) {
  for (const character of text.replace(/\r\n/g, "\n")) {
    const keysym = SPECIAL[character] ?? keysyms.lookup(character.codePointAt(0));
    const shifted = SHIFTED.test(character);
    if (shifted) rfb.sendKey(KeyTable.XK_Shift_L, "ShiftLeft", true);
    rfb.sendKey(keysym, null);
    if (shifted) rfb.sendKey(KeyTable.XK_Shift_L, "ShiftLeft", false);
  }
}

pasteForm.addEventListener("submit", (event) => {
  event.preventDefault();
  typeText(pasteText.value);
  pasteText.value = "";
  rfb.focus();
});

// The Keyboard button focuses a hidden text box, which brings up a phone's on-screen keyboard.
// Its key events go to the guest as the screen's would; an on-screen keyboard often sends none
// that say which key (Android: "Unidentified"), only the text box's changes, so those are typed
// into the guest too: the characters added, a Backspace for each one removed.
const keys = new Keyboard(keysInput);
keys.onkeyevent = (keysym, code, down) => rfb.sendKey(keysym, code, down);
keys.grab();
// Text always in the box, so that the on-screen keyboard's Backspace has something to delete.
const KEYS_FILLER = "_".repeat(40);
let keysBefore = KEYS_FILLER;
function resetKeys() {
  keysInput.value = keysBefore = KEYS_FILLER;
}
resetKeys();

keysInput.addEventListener("input", () => {
  const now = keysInput.value;
  let same = 0;
  while (same < now.length && now[same] === keysBefore[same]) same += 1;
  for (let i = same; i < keysBefore.length; i += 1) {
    rfb.sendKey(KeyTable.XK_BackSpace, "Backspace");
  }
  typeText(now.slice(same));
  keysBefore = now;
  if (now.length < KEYS_FILLER.length / 2 || now.length > KEYS_FILLER.length * 4) resetKeys();
});
keysInput.addEventListener("focus", () => {
  setPressed(keyboardButton, true);
  keysInput.setSelectionRange(keysInput.value.length, keysInput.value.length);
  rfb.focusOnClick = false; // a tap on the screen clicks in the guest and keeps the keyboard up
});
keysInput.addEventListener("blur", () => {
  setPressed(keyboardButton, false);
  rfb.focusOnClick = true;
});
// A click on the button leaves the focus where it is, so that it can tell whether to show the
// keyboard or hide it.
keyboardButton.addEventListener("mousedown", (event) => event.preventDefault());
keyboardButton.addEventListener("click", () => {
  if (document.activeElement === keysInput) {
    rfb.focus();
  } else {
    keysInput.focus();
  }
});
