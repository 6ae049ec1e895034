// The widget manager that draws the saved widgets (@jupyter-widgets/html-manager, ipywidgets 8) typesets
// their labels with MathJax 2's call, MathJax.Hub.Queue(["Typeset", MathJax.Hub, element]); the site loads
// MathJax 3, which has no Hub. This gives it one, before MathJax loads (MathJax then typesets the whole
// page) and after (MathJax 3 replaces window.MathJax with its own object: ready() adds Hub to that one).
(function () {
  function hub() {
    return {
      Queue: function (job) {
        var element = Array.isArray(job) ? job[2] : null;
        if (element && window.MathJax && window.MathJax.typesetPromise) {
          window.MathJax.typesetPromise([element]).catch(function (err) { console.warn("MathJax:", err); });
        }
      },
    };
  }
  window.MathJax = window.MathJax || {};
  window.MathJax.Hub = hub();
  window.MathJax.startup = {
    ready: function () {
      window.MathJax.startup.defaultReady();
      window.MathJax.Hub = hub();
    },
  };
})();
