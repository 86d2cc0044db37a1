// An xterm.js terminal in a box of the page, as the serial terminal and the serial log use it.
// The canvas renderer is loaded before the terminal opens: xterm.js's default (DOM) renderer
// injects <style> elements, which the Content-Security-Policy (style-src 'self') blocks.
// Screen-reader mode mirrors the rows in view as text, for assistive technology.
/* global Terminal, CanvasAddon, FitAddon */

export function openTerminal(box, { fit = false, ...options } = {}) {
  const term = new Terminal({ screenReaderMode: true, scrollback: 5000, ...options });
  term.loadAddon(new CanvasAddon.CanvasAddon());
  if (fit) {
    const fitter = new FitAddon.FitAddon();
    term.loadAddon(fitter);
    term.open(box);
    fitter.fit();
    window.addEventListener("resize", () => fitter.fit());
  } else {
    term.open(box);
  }
  return term;
}
