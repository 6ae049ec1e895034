// Keyboard and screen-reader access to what is drawn in the page after it loads (README, "Accessibility").
// The site's HTML is fixed at its source (website/course_a11y.py); this does what only the browser knows:
// 1. A block that scrolls (code, an output, a wide table or formula) and holds nothing focusable gets a tab
//    stop and a name (role region, "Code", "Output", ...), so that it can be scrolled with the keyboard.
//    Only blocks that do scroll at the window's width get one, and the tab stops follow the width.
// 2. The widget manager (@jupyter-widgets/html-manager) draws a slider's handle with no name: it gets the
//    widget's visible description as its name, and so does the slider's editable readout.
// 3. The figures inside saved widgets (Output widgets) get the description stored with their output,
//    metadata["image/png"]["alt"] in the page's saved widget state; the widget manager drops it.
// 4. Arrow keys in a widget or a scrolled block do what they do there, and do not go to the previous or
//    next page (Sphinx's navigation with keys listens on the whole document).
(function () {
  "use strict";

  var SCROLLER = "article pre, article .table-wrapper, article .math-wrapper, article mjx-container[display], "
    + "article .widget-output, article .jp-OutputArea-output, article .widget-html-content";
  var FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex], [contenteditable]";
  var MARK = "data-course-scroll";  // set on the blocks this script made focusable (and only on them)
  var counter = 0;

  function uid(prefix) {
    counter += 1;
    return prefix + "-" + counter;
  }

  function regionName(el) {
    if (el.closest(".cell_input")) return "Code";
    if (el.closest(".widget-output, .jp-OutputArea, .cell_output")) return "Output";
    if (el.matches(".table-wrapper")) return "Table";
    if (el.matches(".math-wrapper, mjx-container")) return "Formula";
    return "Code";
  }

  function scrolls(el) {
    var style = window.getComputedStyle(el);
    var x = el.scrollWidth > el.clientWidth + 1 && /auto|scroll/.test(style.overflowX);
    var y = el.scrollHeight > el.clientHeight + 1 && /auto|scroll/.test(style.overflowY);
    return x || y;
  }

  function updateScroller(el) {
    var mine = el.hasAttribute(MARK);
    if (!mine && (el.hasAttribute("tabindex") || el.querySelector(FOCUSABLE))) return;  // reachable already
    if (scrolls(el)) {
      if (!mine) {
        el.setAttribute(MARK, "");
        el.setAttribute("tabindex", "0");
        el.setAttribute("role", "region");
        if (!el.hasAttribute("aria-label") && !el.hasAttribute("aria-labelledby")) {
          el.setAttribute("aria-label", regionName(el));
        }
      }
    } else if (mine) {
      el.removeAttribute(MARK);
      el.removeAttribute("tabindex");
      el.removeAttribute("role");
      el.removeAttribute("aria-label");
    }
  }

  var resizes = typeof ResizeObserver === "function"
    ? new ResizeObserver(function (entries) { entries.forEach(function (e) { updateScroller(e.target); }); })
    : null;
  var watched = typeof WeakSet === "function" ? new WeakSet() : null;

  function watchScrollers(root) {
    var found = root.matches && root.matches(SCROLLER) ? [root] : [];
    if (root.querySelectorAll) found = found.concat([].slice.call(root.querySelectorAll(SCROLLER)));
    found.forEach(function (el) {
      updateScroller(el);
      if (resizes && watched && !watched.has(el)) {
        watched.add(el);
        resizes.observe(el);  // its size changes with the window, a <details> opened, a widget drawn
      }
    });
  }

  // --- Widgets ------------------------------------------------------------------------------------------

  function describedBy(label) {
    if (!label || !label.textContent.trim()) return null;  // no description: nothing to name it by
    if (!label.id) label.id = uid("course-widget-label");
    return label.id;
  }

  function nameWidgetControls(root) {
    if (!root.querySelectorAll) return;
    root.querySelectorAll(".jupyter-widgets .widget-label[title='null']").forEach(function (label) {
      label.removeAttribute("title");  // the widget manager's tooltip of None, which a screen reader reads
    });
    root.querySelectorAll(".widget-slider [role=slider]:not([aria-label]):not([aria-labelledby])")
      .forEach(function (handle) {
        var id = describedBy(handle.closest(".widget-slider").querySelector(".widget-label"));
        if (id) handle.setAttribute("aria-labelledby", id);
      });
    root.querySelectorAll(".widget-slider .widget-readout[contenteditable]:not([aria-labelledby])")
      .forEach(function (readout) {
        var id = describedBy(readout.closest(".widget-slider").querySelector(".widget-label"));
        if (!id) return;
        readout.setAttribute("role", "textbox");
        if (!readout.id) readout.id = uid("course-widget-readout");
        readout.setAttribute("aria-labelledby", id);
      });
  }

  var widgetAlts = null;  // base64 of each image in the saved widget state -> its description

  function loadWidgetAlts() {
    widgetAlts = {};
    document.querySelectorAll('script[type="application/vnd.jupyter.widget-state+json"]').forEach(function (s) {
      var state;
      try {
        state = JSON.parse(s.textContent).state || {};
      } catch (err) {
        return;
      }
      Object.keys(state).forEach(function (id) {
        ((state[id].state || {}).outputs || []).forEach(function (out) {
          var data = out.data || {};
          var meta = out.metadata || {};
          Object.keys(data).forEach(function (mime) {
            var alt = (meta[mime] || {}).alt || (meta["image/png"] || {}).alt;
            if (mime.indexOf("image/") === 0 && typeof alt === "string") {
              var source = Array.isArray(data[mime]) ? data[mime].join("") : String(data[mime]);
              widgetAlts[source.replace(/\s+/g, "")] = alt;
            }
          });
        });
      });
    });
  }

  function describeWidgetImages(root) {
    if (!root.querySelectorAll) return;
    var images = root.matches && root.matches("img") ? [root] : [].slice.call(root.querySelectorAll("img"));
    images.forEach(function (img) {
      var src = img.getAttribute("src") || "";
      if (img.hasAttribute("alt") || !img.closest(".jupyter-widgets") || src.indexOf("data:image/") !== 0) return;
      if (widgetAlts === null) loadWidgetAlts();
      var alt = widgetAlts[src.slice(src.indexOf(",") + 1).replace(/\s+/g, "")];
      if (alt) img.setAttribute("alt", alt);
    });
  }

  // --- Keys -----------------------------------------------------------------------------------------------

  function keepKeysInside(event) {
    var target = event.target;
    if (!(target instanceof Element)) return;
    if (target.closest(".jupyter-widgets") || target.hasAttribute(MARK) || target.isContentEditable) {
      event.stopPropagation();  // not to the document, where Sphinx turns arrows into page changes
    }
  }

  // --- Start, and follow what is drawn later -------------------------------------------------------------

  function update(root) {
    nameWidgetControls(root);
    describeWidgetImages(root);
    watchScrollers(root);
  }

  function start() {
    document.body.addEventListener("keydown", keepKeysInside);
    update(document.body);
    new MutationObserver(function (records) {
      records.forEach(function (record) {
        record.addedNodes.forEach(function (node) {
          if (node.nodeType === 1) update(node);
        });
      });
    }).observe(document.body, {childList: true, subtree: true});
    // MathJax typesets after this runs: its wide formulas, once they are there.
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
      MathJax.startup.promise.then(function () { watchScrollers(document.body); });
    }
    window.addEventListener("load", function () { update(document.body); });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
