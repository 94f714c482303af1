// Live enough: lists marked data-refresh are fetched again every few seconds and replaced when what they
// list has changed (the x-console-items header), never while the person has focus inside them. The time
// a request has left counts down in place. Every decision works without this script.
(function () {
  "use strict";
  var PERIOD_MS = 3000;
  function refresh(section) {
    if (section.contains(document.activeElement)) { return; }
    fetch(section.getAttribute("data-refresh"), {
      credentials: "same-origin",
      headers: { "X-Console-Fragment": "1" }
    }).then(function (response) {
      if (!response.ok) { throw new Error("refresh " + response.status); }
      var key = response.headers.get("x-console-items");
      return response.text().then(function (html) { return { key: key, html: html }; });
    }).then(function (answer) {
      if (section.contains(document.activeElement) || answer.key === section.getAttribute("data-items")) { return; }
      section.innerHTML = answer.html;
      section.setAttribute("data-items", answer.key);
      countdown();
    }).catch(function () { /* the next period tries again */ });
  }
  function countdown() {
    document.querySelectorAll("[data-expires-at]").forEach(function (span) {
      var left = Math.max(0, Math.floor((Number(span.getAttribute("data-expires-at")) - Date.now()) / 1000));
      // The words come from the page, in its language: "{m} min {s} s left" or its translation.
      var format = span.getAttribute("data-format") || "{m} min {s} s left";
      span.textContent = format.replace("{m}", String(Math.floor(left / 60))).replace("{s}", String(left % 60));
    });
  }
  function start() {
    var sections = document.querySelectorAll("[data-refresh]");
    if (sections.length) {
      window.setInterval(function () { sections.forEach(refresh); }, PERIOD_MS);
    }
    window.setInterval(countdown, 1000);
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
