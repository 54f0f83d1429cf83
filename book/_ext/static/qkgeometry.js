// qkgeometry book: a table wider than its box scrolls inside it; mark the box so that a hint says so.
(function () {
  function mark() {
    document.querySelectorAll("div.cell_output, details.qkg-collapsed").forEach(function (box) {
      var table = box.querySelector("table");
      var scrolls = !!table && box.scrollWidth > box.clientWidth + 1;
      box.classList.toggle("qkg-scrolls", scrolls);
    });
  }
  window.addEventListener("load", mark);
  window.addEventListener("resize", mark);
  document.addEventListener("toggle", mark, true);
})();
