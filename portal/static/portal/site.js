// A table, chart or command wider than the screen scrolls inside itself; keyboard users must be able to
// reach and scroll it too, so such a region becomes focusable and is named after its caption
// or the heading before it. Without JavaScript the page still works; only this focus is lost.
(function () {
  function label(region) {
    var caption = region.querySelector("caption, figcaption");
    if (caption) return caption.textContent.trim();
    var node = region.previousElementSibling;
    while (node && !/^H[1-6]$/.test(node.tagName)) node = node.previousElementSibling;
    return node ? node.textContent.trim() : document.title;
  }
  function mark() {
    document.querySelectorAll("main table, main figure, main pre").forEach(function (region) {
      if (region.scrollWidth > region.clientWidth + 1) {
        region.setAttribute("tabindex", "0");
        region.setAttribute("data-scrolls", "");
        if (!region.hasAttribute("aria-label") && region.tagName === "TABLE") {
          region.setAttribute("aria-label", label(region));
        }
        if (region.tagName !== "TABLE") region.setAttribute("role", "group");
        if (region.tagName !== "TABLE" && !region.hasAttribute("aria-label")) {
          region.setAttribute("aria-label", label(region));
        }
      } else if (region.hasAttribute("data-scrolls")) {
        region.removeAttribute("tabindex");
        region.removeAttribute("data-scrolls");
      }
    });
  }
  document.addEventListener("DOMContentLoaded", mark);
  window.addEventListener("resize", mark);
})();
