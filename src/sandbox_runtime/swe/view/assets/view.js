/* sandbox-runtime view: draws a run's report from the JSON block of this page (or from
   data.json when served).  Every string from the data goes into the page as text
   (textContent, createTextNode), never as markup: task ids, command output and patches come
   from sandboxes and are not trusted. */
"use strict";
(function () {
  var ROWS_SHOWN = 200;
  var LONG_OUTPUT = 1200;
  var data, run, state = { shown: ROWS_SHOWN, rows: [], selected: null };

  function el(tag, attrs) {
    var node = document.createElement(tag);
    for (var key in attrs || {}) {
      if (key === "text") node.textContent = attrs[key];
      else if (key === "cls") node.className = attrs[key];
      else if (key.slice(0, 2) === "on") node.addEventListener(key.slice(2), attrs[key]);
      else node.setAttribute(key, attrs[key]);
    }
    for (var i = 2; i < arguments.length; i++) add(node, arguments[i]);
    return node;
  }
  function add(node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(node, c); }); return; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  function svg(tag, attrs) {
    var node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (var key in attrs || {}) node.setAttribute(key, attrs[key]);
    return node;
  }
  function fmt(value, digits) {
    if (value === null || value === undefined || value === "") return "-";
    if (typeof value === "number") return value.toFixed(digits === undefined ? 1 : digits);
    return String(value);
  }
  function sum(obj) { var t = 0; for (var k in obj || {}) t += obj[k]; return t; }
  /* The outcome as a word and a symbol, so it reads without colour. */
  var MARKS = { resolved: "\u2714 resolved", unresolved: "\u2716 unresolved", error: "\u26a0 error" };
  function outcomeLabel(task) {
    return el("span", { cls: "outcome " + task.outcome, text: MARKS[task.outcome] || task.outcome });
  }

  /* ---------- summary ---------- */
  function summary() {
    var s = run.summary || {}, acc = s.accounting || {}, causes = {};
    run.tasks.forEach(function (t) { if (t.cause) causes[t.cause] = (causes[t.cause] || 0) + 1; });
    var items = [
      ["tasks", s.tasks], ["resolved", s.resolved], ["unresolved", s.unresolved],
      ["errors", s.errors], ["flagged", s.flagged],
      ["mean reward (graded)", fmt(s.mean_reward, 3)],
      ["sandbox-seconds", fmt(acc.sandbox_seconds)], ["starts", acc.sandboxes],
      ["setups", s.setups], ["retries", sum(acc.retries)], ["faults", sum(acc.faults)],
      ["commands", acc.commands], ["cost", acc.cost === null || acc.cost === undefined ? "not priced" : fmt(acc.cost, 4)]
    ];
    if (acc.pulls !== undefined) items.splice(8, 0, ["pulls", acc.pulls]);
    var dl = el("dl", { cls: "figures" });
    items.forEach(function (it) { add(dl, el("div", {}, el("dt", { text: it[0] }), el("dd", { text: fmt(it[1], 0) }))); });
    var causeList = Object.keys(causes).sort().map(function (c) { return c + ": " + causes[c]; }).join(", ");
    var settings = run.settings || {};
    var about = Object.keys(settings).filter(function (k) { return typeof settings[k] !== "object"; })
      .map(function (k) { return k + "=" + settings[k]; }).join("  ");
    return el("section", { id: "summary", "aria-labelledby": "summary-h" },
      el("h2", { id: "summary-h", text: "Summary of " + run.name }), dl,
      el("p", { text: "errors by cause: " + (causeList || "none") }),
      about ? el("p", { cls: "settings", text: about }) : null);
  }

  /* ---------- table with filters ---------- */
  function options(field) {
    var seen = {};
    run.tasks.forEach(function (t) { var v = field(t); if (v) seen[v] = true; });
    return Object.keys(seen).sort();
  }
  function select(id, label, values) {
    var s = el("select", { id: id, onchange: filter });
    add(s, el("option", { value: "", text: "all" }));
    values.forEach(function (v) { add(s, el("option", { value: v, text: v })); });
    return el("label", {}, label + " ", s);
  }
  function filters() {
    return el("form", { id: "filters", role: "search", onsubmit: function (e) { e.preventDefault(); } },
      select("f-outcome", "status", ["resolved", "unresolved", "error"]),
      select("f-cause", "error cause", options(function (t) { return t.cause; })),
      select("f-backend", "backend", options(function (t) { return t.backend || (run.settings || {}).backend; })),
      select("f-flag", "flag", ["flagged", "not flagged"]),
      el("label", {}, "search ", el("input", { id: "f-search", type: "search", placeholder: "task id or reason", oninput: filter })),
      el("output", { id: "count", "aria-live": "polite" }));
  }
  function value(id) { return document.getElementById(id).value; }
  function filter() {
    var outcome = value("f-outcome"), cause = value("f-cause"), backend = value("f-backend");
    var flag = value("f-flag"), text = value("f-search").toLowerCase();
    var base = (run.settings || {}).backend;
    state.rows = run.tasks.filter(function (t) {
      if (outcome && t.outcome !== outcome) return false;
      if (cause && t.cause !== cause) return false;
      if (backend && (t.backend || base) !== backend) return false;
      if (flag && (flag === "flagged") !== Boolean(t.flagged)) return false;
      if (text && (t.key + " " + (t.reason || "")).toLowerCase().indexOf(text) < 0) return false;
      return true;
    });
    state.shown = ROWS_SHOWN;
    drawRows();
  }
  var COLUMNS = ["task", "outcome", "reward", "error cause", "flag", "steps", "time (s)", "reason"];
  function table() {
    var head = el("tr", {});
    COLUMNS.forEach(function (c) { add(head, el("th", { scope: "col", text: c })); });
    var tbody = el("tbody", { id: "rows", onkeydown: rowKey });
    return el("section", { id: "tasks", "aria-labelledby": "tasks-h" },
      el("h2", { id: "tasks-h", text: "Tasks" }), filters(),
      el("p", { cls: "hint", text: "Arrow keys move through the rows, Enter opens a task, Escape closes it." }),
      el("table", { id: "task-table" }, el("thead", {}, head), tbody),
      el("button", { id: "more", type: "button", onclick: function () { state.shown += ROWS_SHOWN * 5; drawRows(); } }, "show more"));
  }
  function drawRows() {
    var tbody = document.getElementById("rows"), rows = state.rows;
    var frag = document.createDocumentFragment();
    rows.slice(0, state.shown).forEach(function (t, i) {
      var tr = el("tr", { tabindex: i === 0 ? "0" : "-1", "data-key": t.key, onclick: function () { open(t, tr); } },
        el("td", { cls: "id", text: t.key }), el("td", {}, outcomeLabel(t)), el("td", { text: fmt(t.reward) }),
        el("td", { text: t.cause || "" }), el("td", { text: t.flagged ? "\u2691 flagged" : "" }),
        el("td", { text: t.steps }), el("td", { text: fmt((t.timings || {}).total) }),
        el("td", { cls: "reason", text: t.reason || "" }));
      tr._task = t;
      frag.appendChild(tr);
    });
    tbody.textContent = "";
    tbody.appendChild(frag);
    document.getElementById("count").textContent = rows.length + " of " + run.tasks.length + " tasks" +
      (rows.length > state.shown ? " (first " + state.shown + " shown)" : "");
    document.getElementById("more").hidden = rows.length <= state.shown;
  }
  function rowKey(event) {
    var tr = event.target.closest("tr");
    if (!tr) return;
    var next = null;
    if (event.key === "ArrowDown") next = tr.nextElementSibling;
    else if (event.key === "ArrowUp") next = tr.previousElementSibling;
    else if (event.key === "Home") next = tr.parentNode.firstElementChild;
    else if (event.key === "End") next = tr.parentNode.lastElementChild;
    else if (event.key === "Enter" || event.key === " ") { open(tr._task, tr); event.preventDefault(); return; }
    else return;
    event.preventDefault();
    if (next) { tr.tabIndex = -1; next.tabIndex = 0; next.focus(); }
  }

  /* ---------- one task ---------- */
  function close() {
    var panel = document.getElementById("detail");
    if (panel) panel.remove();
    if (state.selected) { state.selected.removeAttribute("aria-selected"); state.selected.focus(); }
    state.selected = null;
  }
  function open(task, tr) {
    var old = document.getElementById("detail");
    if (old) old.remove();
    if (state.selected) state.selected.removeAttribute("aria-selected");
    state.selected = tr || null;
    if (tr) tr.setAttribute("aria-selected", "true");
    var panel = el("section", { id: "detail", role: "region", "aria-labelledby": "detail-h", tabindex: "-1",
      onkeydown: function (e) { if (e.key === "Escape") close(); } },
      el("button", { type: "button", cls: "close", onclick: close, "aria-label": "close task" }, "\u2715 close"),
      el("h2", { id: "detail-h", text: task.key }),
      el("p", {}, outcomeLabel(task), (task.reward === null || task.reward === undefined ? " \u00b7 no reward" : " \u00b7 reward " + fmt(task.reward)) + (task.cause ? " \u00b7 cause: " + task.cause : "")),
      el("p", { cls: "reason-line", text: task.reason || "" }),
      task.error && (task.reason || "").indexOf(task.error) < 0 ? el("p", { cls: "error", text: "error: " + task.error }) : null,
      (task.attempts || []).length ? el("div", { cls: "attempts" }, el("span", { cls: "label", text: "attempts (--retries)" }),
        el("ol", {}, task.attempts.map(function (a) { return el("li", { text: a }); }))) : null,
      group(task), timeline(task), grading(task), flags(task), replayOf(task), transcript(task), patch(task), accounting(task));
    document.getElementById("main").appendChild(panel);
    panel.focus();
  }
  function section(title, cls) {
    return el("section", { cls: "part " + (cls || "") }, el("h3", { text: title }));
  }
  function group(task) {
    if (task.rollout === undefined || task.rollout === null) return null;
    var rollouts = run.tasks.filter(function (t) { return t.task_id === task.task_id && t.rollout !== null && t.rollout !== undefined; })
      .sort(function (a, b) { return a.rollout - b.rollout; });
    var part = section("Group: " + rollouts.length + " rollouts (" + (task.group_mode || "?") + ")", "group");
    var grid = el("div", { cls: "rollouts" });
    rollouts.forEach(function (r) {
      add(grid, el("article", { cls: r.rollout === task.rollout ? "current" : "" },
        el("h4", { text: "rollout " + r.rollout }), outcomeLabel(r),
        el("p", { text: "reward " + fmt(r.reward) + ", " + r.steps + " steps, " + fmt((r.timings || {}).total) + " s" }),
        el("p", { cls: "reason", text: r.reason || "" }),
        r.patch ? diff(r.patch, 12) : el("p", { text: "no patch" })));
    });
    add(part, grid);
    return part;
  }
  function timeline(task) {
    var tm = task.timings || {}, acc = task.accounting || {};
    var total = tm.total || 0;
    if (!total) return null;
    var start = Math.min(acc.start_latency || 0, tm.setup || 0);
    var phases = [["start", start], ["setup", (tm.setup || 0) - start], ["agent", tm.agent || 0], ["grading", tm.grade || 0]];
    var used = phases.reduce(function (a, p) { return a + p[1]; }, 0);
    /* What no phase accounts for: the close, or, when the task ended early, the time until it did. */
    phases.push([tm.grade !== undefined ? "close" : "until the error", Math.max(0, total - used)]);
    var width = 760, scale = width / Math.max(total, used), x = 0;
    var chart = svg("svg", { id: "timeline", viewBox: "0 0 " + (width + 40) + " 86", role: "img",
      "aria-label": "timeline: " + phases.map(function (p) { return p[0] + " " + p[1].toFixed(2) + "s"; }).join(", ") });
    phases.forEach(function (p) {
      var w = p[1] * scale;
      var r = svg("rect", { x: x, y: 10, width: Math.max(w, 0.5), height: 26, "class": "phase " + p[0].split(" ")[0] });
      var tip = svg("title"); tip.textContent = p[0] + ": " + p[1].toFixed(2) + " s"; r.appendChild(tip);
      chart.appendChild(r);
      if (w > 40) { var label = svg("text", { x: x + 4, y: 28 }); label.textContent = p[0]; chart.appendChild(label); }
      x += w;
    });
    var cx = (phases[0][1] + phases[1][1]) * scale;
    (task.actions || []).forEach(function (step) {
      var w = (step.duration || 0) * scale;
      var r = svg("rect", { x: cx, y: 44, width: Math.max(w, 1.5), height: 14, "class": "command" });
      var tip = svg("title"); tip.textContent = "#" + step.index + " " + step.action + ": " + fmt(step.duration, 2) + " s"; r.appendChild(tip);
      chart.appendChild(r);
      cx += w;
    });
    var axis = svg("text", { x: 0, y: 78 }); axis.textContent = "0 s";
    var end = svg("text", { x: width - 50, y: 78 }); end.textContent = total.toFixed(2) + " s";
    chart.appendChild(axis); chart.appendChild(end);
    var part = section("Timeline");
    add(part, chart);
    add(part, el("p", { cls: "hint", text: phases.map(function (p) { return p[0] + " " + p[1].toFixed(2) + " s"; }).join(" \u00b7 ") +
      " \u2014 lower bar: the agent's commands in order, by duration (" + (task.accounting || {}).sandboxes + " sandbox(es))" }));
    return part;
  }
  function testList(value) {
    if (Array.isArray(value)) return value;
    if (typeof value === "string") { try { var v = JSON.parse(value); return Array.isArray(v) ? v : []; } catch (e) { return []; } }
    return [];
  }
  function grading(task) {
    var tests = task.tests;
    var part = section("Grading");
    add(part, el("p", { text: "grading: " + (task.grading || "-") + "; graded in: " + (task.grade_in ? task.grade_in + " sandbox" : "-") +
      (tests ? ", by " + (tests.graded_by || "-") + " (parser " + (tests.parser || "-") + "), exit code " + fmt(tests.exit_code, 0) +
        ", " + fmt(tests.duration, 2) + " s" : "") }));
    if (!tests) { add(part, el("p", { text: "no trajectory record: test results are in trajectories.jsonl" })); return part; }
    var row = ((task.task || {}).row) || {};
    /* The harness's specification is chosen by the row's repository and version (SWE-bench). */
    add(part, el("p", { cls: "meta", text: "format " + (task.format || "-") +
      (row.version ? "; specification " + (row.repo || task.repo) + " " + row.version : "") }));
    var f2p = testList(row.FAIL_TO_PASS), p2p = testList(row.PASS_TO_PASS);
    var status = tests.status || {}, names = Object.keys(status);
    f2p.concat(p2p).forEach(function (n) { if (!(n in status)) names.push(n); });
    if (names.length) {
      var tbl = el("table", { cls: "tests" }, el("thead", {}, el("tr", {},
        el("th", { scope: "col", text: "test" }), el("th", { scope: "col", text: "status" }), el("th", { scope: "col", text: "expected" }))));
      var body = el("tbody", {});
      names.forEach(function (n) {
        var st = status[n] || "not run";
        var kind = f2p.indexOf(n) >= 0 ? "FAIL_TO_PASS" : p2p.indexOf(n) >= 0 ? "PASS_TO_PASS" : "";
        add(body, el("tr", {}, el("td", { cls: "id", text: n }), el("td", { cls: "st " + st.toLowerCase(), text: st }), el("td", { text: kind })));
      });
      add(tbl, body);
      add(part, tbl);
    }
    if (tests.output) add(part, output("test output", tests.output));
    return part;
  }
  function flags(task) {
    if (!(task.tamper || []).length && !(task.dropped || []).length) return null;
    var part = section("\u2691 Flags");
    if ((task.tamper || []).length) {
      add(part, el("p", { text: "changed what grading reads (the reward is still the tests' verdict):" }));
      add(part, el("ul", {}, task.tamper.map(function (f) {
        return el("li", {}, Object.keys(f).map(function (k) { return k + ": " + f[k]; }).join("; "));
      })));
    }
    if ((task.dropped || []).length) {
      add(part, el("p", { text: "strict grading dropped:" }));
      add(part, el("ul", {}, task.dropped.map(function (d) { return el("li", {}, (d.path || "") + " \u2014 " + (d.why || "")); })));
    }
    return part;
  }
  function replayOf(task) {
    var r = (data.replay || {})[task.task_id];
    if (!r) return null;
    var part = section("Replay");
    add(part, el("p", { text: r.status + ": recorded " + fmt((r.recorded || {}).reward) + " (" + ((r.recorded || {}).reason || "") +
      "), replayed " + fmt((r.replayed || {}).reward) + " (" + ((r.replayed || {}).reason || "") + ")" }));
    return part;
  }
  function output(label, text) {
    text = String(text);
    var pre = el("pre", { text: text });
    if (text.length <= LONG_OUTPUT && text.split("\n").length <= 20) return el("div", { cls: "out" }, el("span", { cls: "label", text: label }), pre);
    return el("details", { cls: "out" }, el("summary", { text: label + " (" + text.length + " characters, " + text.split("\n").length + " lines)" }), pre);
  }
  function diff(text, maxLines) {
    var pre = el("pre", { cls: "diff" }), lines = String(text).split("\n");
    (maxLines ? lines.slice(0, maxLines) : lines).forEach(function (line) {
      var c = line.slice(0, 3) === "+++" || line.slice(0, 3) === "---" ? "file" : line[0] === "+" ? "add" : line[0] === "-" ? "del" : line.slice(0, 2) === "@@" ? "hunk" : "";
      add(pre, el("span", { cls: c, text: line + "\n" }));
    });
    if (maxLines && lines.length > maxLines) add(pre, el("span", { cls: "hunk", text: "\u2026 " + (lines.length - maxLines) + " more lines\n" }));
    return pre;
  }
  function transcript(task) {
    var part = section("Transcript (" + (task.actions || []).length + " steps, agent " + (task.agent || "-") + ")", "transcript");
    if (!task.has_trajectory) { add(part, el("p", { text: "no trajectory record for this task" })); return part; }
    (task.notes || []).forEach(function (n) { add(part, el("p", { cls: "note", text: "note: " + n })); });
    var list = el("ol", { cls: "steps" });
    (task.actions || []).forEach(function (step) {
      var args = step.arguments || {}, li = el("li", {});
      if (step.thought) add(li, el("div", { cls: "thought" }, el("span", { cls: "label", text: "model" }), el("pre", { text: step.thought })));
      add(li, el("div", { cls: "call" }, el("span", { cls: "label", text: "tool call" }),
        el("code", { text: step.action }), " ", el("span", { cls: "meta", text: "(" + (step.phase || "act") + ", exit " + fmt(step.exit_code, 0) + ", " + fmt(step.duration, 2) + " s)" })));
      Object.keys(args).forEach(function (k) {
        var v = typeof args[k] === "string" ? args[k] : JSON.stringify(args[k]);
        if (k === "patch" || k === "diff") add(li, el("details", { cls: "out" }, el("summary", { text: k }), diff(v)));
        else add(li, output(k, v));
      });
      if (step.output) add(li, output("output", step.output));
      add(list, li);
    });
    add(part, list);
    if (task.stop_reason) add(part, el("p", { text: "stopped: " + task.stop_reason + (task.submitted ? " (submitted)" : "") }));
    return part;
  }
  function patch(task) {
    if (!task.patch) return null;
    var part = section("Patch (" + task.patch_lines + " lines)");
    add(part, diff(task.patch));
    return part;
  }
  function accounting(task) {
    var acc = task.accounting || {};
    var part = section("Accounting");
    var keys = ["sandboxes", "start_latency", "sandbox_seconds", "commands", "command_seconds", "command_timeouts", "bytes_up", "bytes_down", "grading_seconds", "cost"];
    add(part, el("p", { text: keys.map(function (k) { return k + " " + fmt(acc[k], k.indexOf("second") >= 0 || k === "start_latency" ? 2 : 0); }).join(" \u00b7 ") +
      (sum(acc.retries) ? " \u00b7 retries " + JSON.stringify(acc.retries) : "") + (sum(acc.faults) ? " \u00b7 faults " + JSON.stringify(acc.faults) : "") }));
    return part;
  }

  /* ---------- comparing two runs ---------- */
  function comparison() {
    var c = data.compare;
    if (!c) return null;
    var part = el("section", { id: "compare", "aria-labelledby": "compare-h" },
      el("h2", { id: "compare-h", text: "Changes from " + data.runs[0].name + " to " + data.runs[1].name }),
      el("p", { text: c.changed.length + " task(s) changed, " + c.same + " the same. " +
        Object.keys(c.counts).map(function (k) { return k + ": " + c.counts[k]; }).join(", ") }));
    if (!c.changed.length) return part;
    var tbl = el("table", { id: "compare-table" }, el("thead", {}, el("tr", {},
      ["task", "before", "reason before", "after", "reason after"].map(function (h) { return el("th", { scope: "col", text: h }); }))));
    var body = el("tbody", {}), CHANGES_SHOWN = 1000;
    if (c.changed.length > CHANGES_SHOWN) add(part, el("p", { cls: "hint", text: "the first " + CHANGES_SHOWN + " changes are listed; filter the tasks below for the rest" }));
    c.changed.slice(0, CHANGES_SHOWN).forEach(function (ch) {
      add(body, el("tr", {}, el("td", { cls: "id", text: ch.key }),
        el("td", {}, outcomeLabel(ch.before), " ", fmt(ch.before.reward)), el("td", { cls: "reason", text: ch.before.reason }),
        el("td", {}, outcomeLabel(ch.after), " ", fmt(ch.after.reward)), el("td", { cls: "reason", text: ch.after.reason })));
    });
    add(tbl, body);
    add(part, tbl);
    return part;
  }

  /* ---------- training plots ---------- */
  function plots() {
    if (!data.training || !data.training.length) return null;
    var part = el("section", { id: "training", "aria-labelledby": "training-h" }, el("h2", { id: "training-h", text: "Training, per step" }));
    data.training.forEach(function (plot) { add(part, linePlot(plot)); });
    return part;
  }
  function linePlot(plot) {
    var names = Object.keys(plot.series), W = 520, H = 200, L = 48, B = 30, max = 0, n = 0;
    names.forEach(function (k) { plot.series[k].forEach(function (v) { if (v !== null) max = Math.max(max, v); }); n = Math.max(n, plot.series[k].length); });
    max = max || 1;
    var chart = svg("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img", "class": "plot", "aria-label": plot.title });
    var x = function (i) { return L + (n > 1 ? i * (W - L - 10) / (n - 1) : 0); };
    var y = function (v) { return H - B - v * (H - B - 10) / max; };
    chart.appendChild(svg("line", { x1: L, y1: H - B, x2: W - 10, y2: H - B, "class": "axis" }));
    chart.appendChild(svg("line", { x1: L, y1: 10, x2: L, y2: H - B, "class": "axis" }));
    var top = svg("text", { x: 2, y: 16 }); top.textContent = fmt(max, 2) + (plot.unit || ""); chart.appendChild(top);
    var zero = svg("text", { x: 2, y: H - B }); zero.textContent = "0"; chart.appendChild(zero);
    var xl = svg("text", { x: W / 2, y: H - 6 }); xl.textContent = "step"; chart.appendChild(xl);
    var DASH = ["", "6 3", "2 3", "8 3 2 3"];
    names.forEach(function (k, s) {
      var pts = plot.series[k].map(function (v, i) { return v === null ? null : x(i) + "," + y(v); }).filter(Boolean);
      chart.appendChild(svg("polyline", { points: pts.join(" "), "class": "series s" + (s % 4), "stroke-dasharray": DASH[s % 4] }));
      plot.series[k].forEach(function (v, i) {
        if (v === null) return;
        var dot = svg("circle", { cx: x(i), cy: y(v), r: 3, "class": "s" + (s % 4) });
        var t = svg("title"); t.textContent = k + ", step " + i + ": " + v + (plot.unit || ""); dot.appendChild(t);
        chart.appendChild(dot);
      });
    });
    var legend = el("ul", { cls: "legend" }, names.map(function (k, s) {
      return el("li", { cls: "s" + (s % 4) }, (["\u2014", "- -", "\u00b7\u00b7\u00b7", "-\u00b7-"][s % 4]) + " " + k + ": " + plot.series[k].map(function (v) { return fmt(v, 2); }).join(", "));
    }));
    return el("figure", {}, el("figcaption", { text: plot.title + (plot.unit ? " (" + plot.unit + ")" : "") }), chart, legend);
  }

  function draw() {
    run = data.runs[data.runs.length - 1];
    var main = document.getElementById("main");
    main.textContent = "";
    add(main, [summary(), comparison(), plots(), table()]);
    filter();
    document.addEventListener("keydown", function (e) { if (e.key === "Escape" && state.selected !== undefined) close(); });
    performance.mark("view-ready");
    document.body.setAttribute("data-ready", "true");
  }
  function start() {
    var block = document.getElementById("view-data").textContent;
    if (block.trim()) { data = JSON.parse(block); draw(); return; }
    fetch("data.json").then(function (r) { return r.json(); }).then(function (d) { data = d; draw(); });
  }
  start();
})();
