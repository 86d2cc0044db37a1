// The VM page's serial console panel: the log's text rendered by a read-only xterm.js terminal
// (colours drawn, cursor moves and questions to the terminal carried out, not shown as text),
// scrolled to its newest line. Without scripts the panel shows the server's plain text.
// The panel is refreshed by htmx; a refresh with the same text keeps the terminal as it is
// (and where its reader scrolled to).
import { openTerminal } from "./xterm_box.js";

let shown = null; // { text, box }

function render(panel) {
  const pre = panel.querySelector("#console-log");
  if (!pre) {
    shown = null;
    return;
  }
  const text = JSON.parse(pre.dataset.text);
  if (shown && shown.text === text) {
    pre.replaceWith(shown.box);
    return;
  }
  const box = document.createElement("div");
  box.className = "console-log-terminal";
  box.id = "console-log-terminal";
  pre.replaceWith(box);
  const term = openTerminal(box, {
    fit: true,
    disableStdin: true,
    convertEol: true,
    scrollback: 100000,
  });
  term.write(text, () => term.scrollToBottom());
  shown = { text, box };
}

document.body.addEventListener("htmx:afterSwap", (event) => {
  if (event.detail.target.id === "console-log-panel") {
    render(event.detail.target);
  }
});
