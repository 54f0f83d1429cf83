// qkgeometry book: a table wider than its box scrolls inside it; mark that box so that a hint above it says so.
// A wide figure on a phone keeps readable text and scrolls sideways inside its figure.
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
  // A multi-panel figure shrunk to a phone's column has unreadable text: below READABLE of its natural width it is
  // shown at that share instead (never above its natural size), and its figure scrolls sideways with a hint. The
  // room is the figure's content box (its padding is no room for the image); a figure whose readable share is
  // within SLACK of that room is shown at the room's width instead of scrolling a few pixels. The hint shows only
  // where the figure then really overflows its box. A notebook's PNG is never shown above its natural size (it is
  // drawn at twice it): on a wide screen a narrow stacked figure keeps the size it was drawn at.
  var READABLE = 0.55;
  var SLACK = 1.06;
  function figures() {
    document.querySelectorAll("article figure img").forEach(function (img) {
      var figure = img.closest("figure");
      if (!figure) return;
      img.classList.remove("qkg-wide-figure");
      figure.classList.remove("qkg-figure-scrolls");
      img.style.minWidth = "";
      img.style.width = "";
      img.style.maxWidth = "";
      // the still image of an interactive figure whose chart has drawn is hidden: the chart fits its column
      if (img.closest(".qkg-interactive.qkg-live")) return;
      var natural = parseFloat(img.getAttribute("width")) || img.naturalWidth / 2;
      if (!natural) return;
      // a notebook's PNG (drawn at twice its size) is never shown larger than it was drawn
      var cap = /\.png(?:$|[?#])/i.test(img.getAttribute("src") || "") ? "min(100%, " + natural + "px)" : "";
      img.style.maxWidth = cap;
      var style = getComputedStyle(figure);
      var room = figure.clientWidth - (parseFloat(style.paddingLeft) || 0) - (parseFloat(style.paddingRight) || 0);
      if (room * SLACK < READABLE * natural) {
        img.classList.add("qkg-wide-figure");
        figure.classList.add("qkg-figure-scrolls");
        img.style.minWidth = Math.round(READABLE * natural) + "px";
        img.style.width = img.style.minWidth;  // at that share, not at its natural size
        img.style.maxWidth = "none";
        if (figure.scrollWidth <= figure.clientWidth + 1) {  // it fits after all: no scroll, no hint
          img.classList.remove("qkg-wide-figure");
          figure.classList.remove("qkg-figure-scrolls");
          img.style.minWidth = "";
          img.style.width = "";
          img.style.maxWidth = cap;
        }
      }
    });
  }
  window.addEventListener("load", figures);
  window.addEventListener("resize", figures);
  window.addEventListener("load", mark);
  window.addEventListener("resize", mark);
  document.addEventListener("toggle", mark, true);
})();
