// The portal's image upload: sends the form to POST /api/images/ with XMLHttpRequest so the
// page shows the upload's progress, then reloads the list (or shows the API's refusal).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("image-upload");
  if (!form) return;
  const bar = document.getElementById("image-progress");
  const status = document.getElementById("image-upload-status");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const request = new XMLHttpRequest();
    request.open("POST", form.action);
    request.setRequestHeader("X-CSRFToken", form.elements.csrfmiddlewaretoken.value);
    request.setRequestHeader("Accept", "application/json");
    request.upload.addEventListener("progress", (progress) => {
      if (progress.lengthComputable) {
        bar.value = Math.round((100 * progress.loaded) / progress.total);
        status.textContent = `Uploading: ${bar.value}%`;
      }
    });
    request.addEventListener("load", () => {
      if (request.status === 201) {
        status.textContent = "Uploaded.";
        window.location.assign(form.dataset.done);
        return;
      }
      let answer = {};
      try { answer = JSON.parse(request.responseText); } catch { /* not JSON */ }
      const words = Object.entries(answer).map(([field, said]) =>
        field === "detail" ? String(said) : `${field}: ${[].concat(said).join(" ")}`);
      status.textContent = `Refused: ${words.join("; ") || request.status}`;
    });
    request.addEventListener("error", () => { status.textContent = "The upload failed."; });
    bar.hidden = false;
    bar.value = 0;
    request.send(new FormData(form));
  });
});
