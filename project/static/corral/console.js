// The VM console page: noVNC (vendored, see project/static/vendor/novnc-1.7.0) on the
// websocket URL the page was given with its one-time ticket.
import RFB from "../vendor/novnc-1.7.0/core/rfb.js";

const screen = document.getElementById("console-screen");
const status = document.getElementById("console-status");
const rfb = new RFB(screen, screen.dataset.url);
rfb.scaleViewport = true;
rfb.addEventListener("connect", () => {
  status.textContent = "Connected";
});
rfb.addEventListener("disconnect", (event) => {
  status.textContent = event.detail.clean
    ? "Disconnected. Open the console again from the VM's page."
    : "The console could not be reached (the ticket may have expired or been used).";
});
