// Corral's browser error reporter, injected by the dev proxy into every HTML page.
//
// It reports uncaught errors, unhandled promise rejections, console.error calls and
// failed fetch/XHR requests to /__corral/errors, in batches. It must never change what
// the page does: every wrapped function is called as before and its result returned
// untouched, and everything of ours runs inside try/catch. A failed request's report
// carries the proxy's id of it (the X-Corral-Request response header, same-origin
// responses only), so that Corral can tell which request in its log the page saw fail.
(function () {
  "use strict";
  var w = window;
  // Once per document: a duplicated tag or an HMR re-run must not wrap twice.
  if (w.__corralErrors) return;
  try {
    Object.defineProperty(w, "__corralErrors", { value: true });
  } catch (e) {
    return;
  }

  // The proxy's report key, in our own tag (data-k) in the document: only this page can
  // read it, and reports without it are refused. Read now: currentScript is ours only
  // while this runs.
  var KEY = "";
  try {
    var me = document.currentScript;
    KEY = (me && me.getAttribute("data-k")) || "";
  } catch (e) {}

  var ENDPOINT = "/__corral/errors";
  var SELF = "/__corral/";
  var MAX_PER_PAGE = 100; // an error in a render loop must not flood the proxy
  var BATCH = 20;
  var DELAY_MS = 250;
  var MESSAGE_MAX = 2000;
  var STACK_MAX = 8000;
  var EXCERPT_MAX = 300;
  // The shape of the proxy's request ids: 8 hex digits, a dash, a number.
  var REQUEST_ID = /^[0-9a-f]{8}-[1-9][0-9]{0,19}$/;

  var queue = [];
  var reported = 0;
  var timer = null;
  var busy = false; // set while we are reporting: our own console.error is not an error

  var origFetch = typeof w.fetch === "function" ? w.fetch : null;
  var XHR = w.XMLHttpRequest;
  var origOpen = XHR && XHR.prototype.open;
  var origSend = XHR && XHR.prototype.send;

  function cut(s, max) {
    s = s == null ? "" : String(s);
    return s.length > max ? s.slice(0, max) + "…" : s;
  }

  function describe(value) {
    try {
      if (value instanceof Error) return String(value);
      if (typeof value === "string") return value;
      if (typeof value === "object" && value !== null) return JSON.stringify(value);
      return String(value);
    } catch (e) {
      try {
        return String(value);
      } catch (e2) {
        return "[unprintable]";
      }
    }
  }

  // "url:line:col" at the end of a stack frame, in Chrome ("    at f (url:1:2)") and
  // Firefox/Safari ("f@url:1:2") form.
  var FRAME = /((?:https?|file|blob):\/\/[^\s()]*?):(\d+):(\d+)\)?\s*$/;

  // The first frame of a stack that is not ours.
  function caller(stack) {
    var lines = String(stack || "").split("\n");
    for (var i = 0; i < lines.length; i++) {
      var m = FRAME.exec(lines[i]);
      if (m && m[1].indexOf(SELF) < 0) return { source: m[1], line: +m[2], column: +m[3] };
    }
    return null;
  }

  // The stack where we are called from, without our own frames.
  function callStack() {
    try {
      return String(new Error().stack || "")
        .split("\n")
        .filter(function (line) {
          return FRAME.test(line) && line.indexOf(SELF) < 0;
        })
        .join("\n");
    } catch (e) {
      return "";
    }
  }

  // console.error's arguments as the console shows them: a first string's %s, %d, %i,
  // %f, %o, %O and %c replaced by the arguments they take (%c's style dropped), the
  // rest appended. React's warnings are format strings with the component stack as the
  // last argument.
  function format(args) {
    var i = 1;
    var out = "";
    var first = args[0];
    if (typeof first === "string") {
      out = first.replace(/%([sdifoOc%])/g, function (m, c) {
        if (c === "%") return "%";
        if (i >= args.length) return m;
        var a = args[i++];
        if (c === "c") return "";
        if (c === "d" || c === "i") return typeof a === "symbol" ? "NaN" : String(parseInt(a, 10));
        if (c === "f") return typeof a === "symbol" ? "NaN" : String(parseFloat(a));
        return describe(a);
      });
    } else if (args.length) {
      out = describe(first);
    }
    for (; i < args.length; i++) out += " " + describe(args[i]);
    return out;
  }

  function report(kind, message, stack, where, request) {
    if (busy || reported >= MAX_PER_PAGE) return;
    reported++;
    where = where || caller(stack) || {};
    var error = {
      kind: kind,
      message: cut(message, MESSAGE_MAX),
      stack: cut(stack, STACK_MAX),
      source: where.source || "",
      line: where.line || 0,
      column: where.column || 0,
      page: String(location.href),
      time: new Date().toISOString()
    };
    if (request) error.request = request;
    queue.push(error);
    if (queue.length >= BATCH) flush();
    else if (!timer) timer = setTimeout(flush, DELAY_MS);
  }

  function flush(leaving) {
    if (timer) {
      clearTimeout(timer);
      timer = null;
    }
    if (!queue.length) return;
    var body;
    try {
      body = JSON.stringify({ key: KEY, page: String(location.href), errors: queue.splice(0, queue.length) });
    } catch (e) {
      return;
    }
    busy = true;
    try {
      if (leaving && navigator.sendBeacon && navigator.sendBeacon(ENDPOINT, new Blob([body], { type: "text/plain;charset=UTF-8" }))) return;
      if (origFetch) {
        origFetch.call(w, ENDPOINT, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: body,
          credentials: "same-origin",
          keepalive: leaving === true && body.length < 60000
        }).catch(function () {});
      } else if (XHR) {
        var x = new XHR();
        origOpen.call(x, "POST", ENDPOINT, true);
        x.setRequestHeader("content-type", "application/json");
        origSend.call(x, body);
      }
    } catch (e) {
      // Reporting is best effort.
    } finally {
      busy = false;
    }
  }

  // Uncaught errors, and scripts or stylesheets that failed to load (capture phase: load
  // errors do not bubble).
  w.addEventListener(
    "error",
    function (ev) {
      try {
        var t = ev.target;
        if (t && t !== w && t.tagName) {
          var url = t.src || t.href || "";
          if (url.indexOf(SELF) < 0 && /^(SCRIPT|LINK)$/.test(t.tagName)) {
            report("error", "failed to load " + t.tagName.toLowerCase() + " " + url, "", { source: url });
          }
          return;
        }
        var err = ev.error;
        report(
          "error",
          ev.message || describe(err),
          err && err.stack ? String(err.stack) : "",
          ev.filename ? { source: ev.filename, line: ev.lineno, column: ev.colno } : null
        );
      } catch (e) {}
    },
    true
  );

  w.addEventListener("unhandledrejection", function (ev) {
    try {
      var r = ev.reason;
      var message = r instanceof Error ? r.name + ": " + r.message : describe(r);
      report("unhandledrejection", "Unhandled rejection: " + message, r && r.stack ? String(r.stack) : "", null);
    } catch (e) {}
  });

  if (w.console && typeof w.console.error === "function") {
    var origError = w.console.error;
    w.console.error = function () {
      try {
        if (!busy) {
          var stack = "";
          for (var i = 0; i < arguments.length; i++) {
            if (!stack && arguments[i] instanceof Error) stack = String(arguments[i].stack || "");
          }
          var site = callStack();
          report("console.error", format(arguments), stack || site, caller(site));
        }
      } catch (e) {}
      return origError.apply(this, arguments);
    };
  }

  // The call site: its stack (where the app made the request, through whatever library)
  // and its first frame.
  function callSite() {
    var stack = callStack();
    return { stack: stack, where: caller(stack) };
  }

  function failed(kind, method, url, status, statusText, excerpt, site, request) {
    var message = (method || "GET").toUpperCase() + " " + url + " → " + status + (statusText ? " " + statusText : "");
    if (excerpt) message += ": " + cut(excerpt, EXCERPT_MAX);
    report(kind, message, site.stack, site.where, request);
  }

  // The proxy's id of a request, from its response when it is a same-origin one (a
  // "basic" fetch response; an XHR whose final URL is on this origin) and has the shape.
  function checkedId(id) {
    return id && REQUEST_ID.test(id) ? id : "";
  }

  function fetchRequestId(res) {
    try {
      return res.type === "basic" ? checkedId(res.headers.get("x-corral-request")) : "";
    } catch (e) {
      return "";
    }
  }

  function xhrRequestId(xhr) {
    try {
      var url = xhr.responseURL;
      if (!url || new URL(url, location.href).origin !== location.origin) return "";
      return checkedId(xhr.getResponseHeader("x-corral-request"));
    } catch (e) {
      return "";
    }
  }

  function textual(contentType) {
    return /^(text\/|application\/(json|problem\+json|xml))/i.test(contentType || "");
  }

  if (origFetch) {
    w.fetch = function (input, init) {
      var promise = origFetch.apply(this, arguments);
      try {
        var url = typeof input === "string" ? input : input && input.url ? input.url : String(input);
        var method = (init && init.method) || (input && input.method) || "GET";
        if (url.indexOf(SELF) < 0) {
          var site = callSite();
          promise.then(
            function (res) {
              try {
                if (res.status < 500) return;
                var id = fetchRequestId(res);
                if (!textual(res.headers.get("content-type"))) {
                  failed("fetch", method, url, res.status, res.statusText, "", site, id);
                  return;
                }
                res
                  .clone()
                  .text()
                  .then(
                    function (text) {
                      failed("fetch", method, url, res.status, res.statusText, text, site, id);
                    },
                    function () {
                      failed("fetch", method, url, res.status, res.statusText, "", site, id);
                    }
                  );
              } catch (e) {}
            },
            function (err) {
              try {
                if (err && err.name === "AbortError") return;
                report("fetch", (method || "GET").toUpperCase() + " " + url + " failed: " + describe(err), site.stack, site.where);
              } catch (e) {}
            }
          );
        }
      } catch (e) {}
      return promise;
    };
  }

  if (XHR && origOpen && origSend) {
    XHR.prototype.open = function (method, url) {
      try {
        this.__corral = { method: String(method), url: String(url) };
      } catch (e) {}
      return origOpen.apply(this, arguments);
    };
    XHR.prototype.send = function () {
      try {
        var xhr = this;
        var req = xhr.__corral;
        if (req && req.url.indexOf(SELF) < 0) {
          var site = callSite();
          var aborted = false;
          xhr.addEventListener("abort", function () {
            aborted = true;
          });
          xhr.addEventListener("loadend", function () {
            try {
              if (aborted) return;
              if (xhr.status >= 500) {
                var text = "";
                if ((xhr.responseType === "" || xhr.responseType === "text") && textual(xhr.getResponseHeader("content-type"))) {
                  text = xhr.responseText;
                }
                failed("xhr", req.method, req.url, xhr.status, xhr.statusText, text, site, xhrRequestId(xhr));
              } else if (xhr.status === 0) {
                report("xhr", req.method.toUpperCase() + " " + req.url + " failed: network error", site.stack, site.where);
              }
            } catch (e) {}
          });
        }
      } catch (e) {}
      return origSend.apply(this, arguments);
    };
  }

  w.addEventListener("pagehide", function () {
    try {
      flush(true);
    } catch (e) {}
  });
})();
