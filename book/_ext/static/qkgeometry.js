// qkgeometry book: a table wider than its box scrolls inside it; mark that box so that a hint above it says so.
(function () {
  function mark() {
    document.querySelectorAll(".qkg-scrolls").forEach(function (box) { box.classList.remove("qkg-scrolls"); });
    document.querySelectorAll("article table").forEach(function (table) {
      for (var box = table.parentElement; box && box.tagName !== "ARTICLE"; box = box.parentElement) {
        var overflow = getComputedStyle(box).overflowX;
        if ((overflow === "auto" || overflow === "scroll") && box.scrollWidth > box.clientWidth + 1) {
          box.classList.add("qkg-scrolls");
          break;
        }
      }
    });
  }
  window.addEventListener("load", mark);
  window.addEventListener("resize", mark);
  document.addEventListener("toggle", mark, true);
})();
