// The classifyd console: one page, five views, over the daemon's api/.
// Message content is hostile (spam is written by attackers): every field
// is put in the page as text (textContent, createTextNode), never parsed
// as HTML, and the Content-Security-Policy allows no inline script.
"use strict";

const state = {
  secret: sessionStorage.getItem("classifyd-secret") || "",
  access: { read: false, write: false, teaches: false },
  classes: [],
  page: "status",
  review: { items: [], at: 0, undo: [], keys: [], busy: false },
  scanned: null,
  timer: null,
};

// ---- helpers --------------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "on") for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
    else if (k === "data") for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = dv;
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

function $(id) {
  return document.getElementById(id);
}

// A line under the header: what just happened (`ok`), or what went wrong.
function notice(text, ok) {
  $("notice").textContent = text || "";
  $("notice").classList.toggle("ok", !!ok);
}

async function api(path, body) {
  const headers = {};
  if (state.secret) headers.Authorization = "Bearer " + state.secret;
  const init = { headers, cache: "no-store" };
  if (body !== undefined) {
    init.method = "POST";
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch("api/" + path, init);
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = new Error(data.error || r.statusText);
    e.status = r.status;
    throw e;
  }
  return data;
}

function pct(v) {
  return v === null || v === undefined ? "-" : (100 * v).toFixed(2) + " %";
}

// A JSON object of name: value, or a list of [name, value], as a list.
function pairs(x) {
  return Array.isArray(x) ? x : Object.entries(x || {});
}

function num(v, digits) {
  return typeof v === "number" ? v.toFixed(digits) : "-";
}

function ago(ms) {
  if (!ms) return "-";
  const s = Math.max(0, (Date.now() - ms) / 1000);
  if (s < 90) return s.toFixed(0) + " s ago";
  if (s < 5400) return (s / 60).toFixed(0) + " min ago";
  return (s / 3600).toFixed(1) + " h ago";
}

// The most characters a field from a message shows until asked for whole.
const FIELD_CHARS = 80;

// A field from a message (an id, a user, a label, a reporter), isolated
// from the page's own words (<bdi>: a right-to-left override in it turns
// nothing around it) and cut to FIELD_CHARS; a click shows it whole.
function field(value, cls) {
  const v = value === null || value === undefined ? "" : String(value);
  const b = el("bdi", { class: "field" + (cls ? " " + cls : ""), dir: "auto" });
  if (v.length <= FIELD_CHARS) {
    b.textContent = v;
    return b;
  }
  const cut = v.slice(0, FIELD_CHARS) + "\u2026";
  b.textContent = cut;
  b.classList.add("cut");
  b.title = `${v.length} characters: click to show whole`;
  b.addEventListener("click", () => {
    const whole = b.classList.toggle("whole");
    b.textContent = whole ? v : cut;
  });
  return b;
}

function labelSpan(label) {
  return field(label || "(none)", "label " + String(label).replace(/[^a-z0-9_-]/gi, ""));
}

function row(cells, head) {
  return el("tr", {}, cells.map((c) => el(head ? "th" : "td", typeof c === "number" ? { class: "num" } : {}, c)));
}

// ---- access ---------------------------------------------------------------

async function login() {
  try {
    state.access = await api("access");
    setClasses(state.access.classes);
    document.body.classList.toggle("readonly", !(state.access.write && state.access.teaches));
    document.body.classList.add("in");
    clear($("who")).append(state.access.write ? "may read and teach" : "may read");
    if (state.access.name) $("who").append(" as ", field(state.access.name, "reviewer"));
    notice("");
    return true;
  } catch (e) {
    state.access = { read: false, write: false };
    document.body.classList.add("readonly");
    document.body.classList.remove("in");
    $("who").textContent = "";
    notice(e.status === 401 ? "Log in: this console asks for a secret." : "Cannot reach the daemon: " + e.message);
    return false;
  }
}

// Forgets the secret this tab holds: the next request asks again.
function logout() {
  state.secret = "";
  sessionStorage.removeItem("classifyd-secret");
  state.access = { read: false, write: false };
  state.review = { items: [], at: 0, undo: [], keys: [], busy: false };
  document.body.classList.add("readonly");
  document.body.classList.remove("in");
  $("who").textContent = "";
  for (const id of ["cards", "members", "bands", "drift", "chart", "history", "review-item", "review-keys", "reporters", "scan-result", "model"]) clear($(id));
  notice("Logged out.", true);
}

// The model's classes, as the daemon names them (every page needs them:
// label buttons, number keys).
function setClasses(classes) {
  if (Array.isArray(classes) && classes.length) state.classes = classes;
  fillLabels();
}

// ---- status ---------------------------------------------------------------

async function showStatus() {
  const [s, series] = await Promise.all([api("status"), api("series")]);
  setClasses(s.classes);
  $("review-count").textContent = s.review_left ? String(s.review_left) : "";
  const pts = series.points || [];
  let rate = "-";
  if (pts.length >= 2) {
    const a = pts[Math.max(0, pts.length - 6)], b = pts[pts.length - 1];
    const dt = (b.at_ms - a.at_ms) / 1000;
    if (dt > 0) rate = ((b.messages - a.messages) / dt).toFixed(1) + " /s";
  }
  const cards = [
    ["model version", s.model_version, "changed " + ago(s.model_changed_ms)],
    ["role", s.role, (s.classes || []).join(", ")],
    ["progressive accuracy", pct(s.progressive_accuracy), s.progressive_examples + " labeled"],
    ["window accuracy", pct(s.window_accuracy), "ROC AUC " + num(s.roc_auc, 4)],
    ["published accuracy", pct(s.published_accuracy), s.published_examples + " judged by late labels"],
    ["throughput", rate, s.messages + " messages this run"],
    ["learned / predicted", s.learned + " / " + s.predicted, s.bad + " bad input"],
    ["review band", num(s.review_band, 3), s.review_left + " waiting for review"],
  ];
  clear($("cards")).append(...cards.map(([k, v, sub]) => el("div", { class: "card" }, el("span", {}, k), el("b", {}, v), el("span", {}, sub))));
  clear($("members")).append(row(["member", "weight"], true), ...(s.members || []).map(([m, w]) => row([m, num(w, 4)])));
  clear($("bands")).append(
    row(["band", "labeled", "right", "accuracy"], true),
    ...(s.user_bands || []).map(([b, n, c]) => row([b, n, c, n ? pct(c / n) : "-"])),
  );
  clear($("drift")).append(row(["stream", "statistic", "detections"], true), ...(s.drift || []).map(([w, st, d]) => row([w, num(st, 3), d])));
  chart(pts);
  await Promise.all([showDead(), showPool()]);
  if (!document.body.dataset.rendered) document.body.dataset.rendered = String(performance.now());
}

// The status's charts: accuracy and ROC AUC, messages per second by
// verdict, labels and dead letters per second; each with axes, times and
// the value under the pointer.
const COLORS = ["#2b5797", "#e39b00", "#1b7f3b", "#8e44ad", "#b3261e", "#16a085", "#7f8c8d", "#d35400"];

function chart(points) {
  const pct = (v) => (100 * v).toFixed(2) + " %";
  const acc = [
    ["progressive", (p) => p.progressive_accuracy],
    ["window", (p) => p.window_accuracy],
    ["published", (p) => p.published_accuracy],
    ["ROC AUC", (p) => p.roc_auc],
  ].map(([name, get]) => ({ name, pts: points.filter((p) => typeof get(p) === "number").map((p) => [p.at_ms, get(p)]) }));
  drawChart("chart", acc, { format: pct });
  const labels = [...new Set(points.flatMap((p) => (p.verdicts || []).map(([l]) => l)))];
  const verdicts = labels.map((l) => ({ name: l, pts: rates(points, (p) => ((p.verdicts || []).find(([x]) => x === l) || [l, 0])[1]) }));
  drawChart("chart-verdicts", verdicts, { format: perSecond, zero: true });
  const lessons = [
    { name: "labels", pts: rates(points, (p) => p.labels || 0) },
    { name: "dead letters", pts: rates(points, (p) => p.bad || 0) },
  ];
  drawChart("chart-labels", lessons, { format: perSecond, zero: true });
  $("chart").dataset.points = String(points.length);
}

function perSecond(v) {
  if (v === 0) return "0 /s";
  return (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + " /s";
}

// Per-second rates of a count that grows, between consecutive points.
function rates(points, count) {
  const out = [];
  for (let i = 1; i < points.length; i++) {
    const dt = (points[i].at_ms - points[i - 1].at_ms) / 1000;
    if (dt > 0) out.push([points[i].at_ms, Math.max(0, count(points[i]) - count(points[i - 1])) / dt]);
  }
  return out;
}

// Ticks at a round step covering [lo, hi].
function ticks(lo, hi, n) {
  const raw = (hi - lo) / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
  return out;
}

function svgEl(tag, attrs, text) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function drawChart(id, series, opts) {
  const box = clear($(id));
  const legend = clear($("legend-" + id));
  const W = 1000, H = 240, L = 80, R = 12, T = 12, B = 28;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  const all = series.flatMap((s) => s.pts);
  if (!all.length) {
    svg.appendChild(svgEl("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "axis" }, "no data yet"));
    box.appendChild(svg);
    return;
  }
  const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]), t0 + 1000);
  let lo = opts.zero ? 0 : Math.min(...all.map((p) => p[1])), hi = Math.max(...all.map((p) => p[1]));
  // A flat line still gets a scale; accuracies near 1 are read at their
  // own scale (98.9 % and 99.5 % apart), not on 0-1.
  const pad = Math.max((hi - lo) * 0.08, Math.abs(hi) * 0.002, 1e-6);
  if (!opts.zero) lo -= pad;
  hi += pad;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => H - B - ((v - lo) / (hi - lo)) * (H - T - B);
  for (const v of ticks(lo, hi, 4)) {
    svg.appendChild(svgEl("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    svg.appendChild(svgEl("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "axis y" }, opts.format(v)));
  }
  for (const t of ticks(t0, t1, 5)) {
    svg.appendChild(svgEl("text", { x: x(t), y: H - 8, "text-anchor": "middle", class: "axis x" }, new Date(t).toLocaleTimeString()));
  }
  svg.appendChild(svgEl("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis-line" }));
  svg.appendChild(svgEl("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis-line" }));
  series.forEach((s, i) => {
    if (!s.pts.length) return;
    const color = COLORS[i % COLORS.length];
    const pts = s.pts.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`);
    if (pts.length === 1) pts.push(`${(W - R).toFixed(1)},${y(s.pts[0][1]).toFixed(1)}`);
    svg.appendChild(svgEl("polyline", { points: pts.join(" "), fill: "none", stroke: color, "stroke-width": 2, "data-series": s.name }));
    const last = s.pts[s.pts.length - 1][1];
    legend.appendChild(el("span", { class: "key" }, el("i", { class: "swatch c" + (i % COLORS.length) }), field(s.name), " " + opts.format(last)));
  });
  const readout = svgEl("text", { x: W - R, y: T + 10, "text-anchor": "end", class: "readout" }, "");
  const cursor = svgEl("line", { x1: 0, x2: 0, y1: T, y2: H - B, class: "cursor", visibility: "hidden" });
  svg.append(cursor, readout);
  svg.addEventListener("mousemove", (ev) => {
    const r = svg.getBoundingClientRect();
    const t = t0 + ((ev.clientX - r.left) / r.width * W - L) / (W - L - R) * (t1 - t0);
    const near = (pts) => pts.reduce((a, b) => (Math.abs(b[0] - t) < Math.abs(a[0] - t) ? b : a));
    const shown = series.filter((s) => s.pts.length).map((s) => [s.name, near(s.pts)]);
    if (!shown.length) return;
    const at = shown[0][1][0];
    cursor.setAttribute("x1", x(at));
    cursor.setAttribute("x2", x(at));
    cursor.setAttribute("visibility", "visible");
    readout.textContent = new Date(at).toLocaleTimeString() + "  " + shown.map(([n, p]) => `${n} ${opts.format(p[1])}`).join("  ");
  });
  box.dataset.points = String(all.length);
  box.appendChild(svg);
}

// The pool's instances as they last reported (--pool-topic): each one's
// role and served version, how far behind the learner, when it reported.
async function showPool() {
  const { pool, at_ms } = await api("pool");
  $("pool-box").hidden = !pool;
  if (!pool) return;
  const newest = Math.max(0, ...pool.filter((m) => m.role !== "predictor").map((m) => m.model_version));
  const skew = Date.now() - at_ms;
  clear($("pool")).append(
    row(["instance", "role", "model version", "behind", "reported", "started"], true),
    ...pool.map((m) => el("tr", { data: { role: m.role } },
      el("td", {}, field(m.instance)),
      el("td", {}, m.role),
      el("td", { class: "num" }, m.model_version),
      el("td", { class: "num" }, m.role === "predictor" && newest ? Math.max(0, newest - m.model_version) : "-"),
      el("td", {}, ago(m.at_ms + skew)),
      el("td", {}, ago(m.started_ms + skew)),
    )),
  );
}

async function showDead() {
  const { dead, total, kept } = await api("dead");
  $("dead-count").textContent = total ? `(the last ${Math.min(total, kept)} of ${total})` : "(none)";
  clear($("dead")).append(
    row(["when", "reason", "detail"], true),
    ...dead.map((d) => el("tr", {}, el("td", {}, new Date(d.at_ms).toLocaleTimeString()), el("td", {}, d.reason), el("td", { class: "text" }, field(d.detail)))),
  );
}

// ---- history --------------------------------------------------------------

function fillLabels() {
  const sel = $("f-label");
  const have = new Set([...sel.options].map((o) => o.value));
  for (const c of state.classes) if (!have.has(c)) sel.appendChild(el("option", { value: c }, c));
}

function teachButtons(entry, onDone) {
  const box = el("span", { class: "teach" });
  for (const c of state.classes) {
    box.appendChild(el("button", { type: "button", class: "teach", data: { label: c }, on: { click: () => teach(entry, c).then(onDone) } }, c));
  }
  box.appendChild(el("button", { type: "button", class: "teach", data: { forget: "1" }, on: { click: () => forget(entry).then(onDone) } }, "forget"));
  return box;
}

// The history's filters as the form says them.
function historyQuery() {
  const num = (v) => (v.trim() === "" ? null : Number(v));
  return {
    label: $("f-label").value || null,
    user: $("f-user").value || null,
    min: num($("f-min").value),
    max: num($("f-max").value),
    q: $("f-q").value || null,
    uncertain: $("f-uncertain").checked ? true : null,
  };
}

// The first page of the history (or, `older`, the next page after the
// rows shown), 200 rows a page.
async function showHistory(older) {
  const table = $("history");
  const before = older === true ? Number(table.dataset.oldest) : null;
  const q = Object.assign(historyQuery(), { limit: 200, before });
  const { entries, more } = await api("history", q);
  if (before === null) {
    clear(table).appendChild(row(["when", "id", "user", "label", "margin", "message", "why", ""], true));
  }
  if (entries.length) table.dataset.oldest = String(entries[entries.length - 1].seq);
  $("history-older").hidden = !more;
  for (const e of entries) {
    const why = el("span", {}, (e.explanation || []).slice(0, 3).map((c) => c.feature).join(", "));
    if (!e.explanation || !e.explanation.length) {
      // Explained on demand: the model as it stands now, nothing kept.
      why.appendChild(el("button", { type: "button", class: "why", on: { click: () => explainRow(e, why) } }, "why?"));
    }
    const taught = e.taught ? el("span", { class: "taught" }, "taught: ", field(e.taught), e.taught_by ? [" by ", field(e.taught_by, "reviewer")] : null) : null;
    const tr = el("tr", { data: { id: e.id } },
      el("td", {}, new Date(e.at_ms).toLocaleTimeString()),
      el("td", { class: "id" }, field(e.id)),
      el("td", {}, field(e.user || "")),
      el("td", {}, labelSpan(e.label), e.uncertain ? " ?" : ""),
      el("td", { class: "num" }, num2(e.margin)),
      el("td", { class: "text" }, el("bdi", { dir: "auto" }, e.text)),
      el("td", {}, why),
      el("td", {}, taught, teachButtons(e, () => showHistory())),
    );
    table.appendChild(tr);
  }
}

// Every row the filters keep, saved as a JSON-lines file.
async function exportHistory() {
  const headers = { "Content-Type": "application/json" };
  if (state.secret) headers.Authorization = "Bearer " + state.secret;
  const r = await fetch("api/export", { method: "POST", headers, body: JSON.stringify(historyQuery()), cache: "no-store" });
  if (!r.ok) return notice("Not exported: " + r.statusText);
  const url = URL.createObjectURL(await r.blob());
  const a = el("a", { href: url, download: "classifyd-history.jsonl" });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

async function explainRow(entry, into) {
  try {
    const look = await api("look", { id: entry.id });
    clear(into).append((look.explanation || []).slice(0, 5).map((c) => `${c.feature} ${num2(c.contribution)}`).join(", ") || "-");
  } catch (e) {
    notice("Not explained: " + e.message);
  }
}

function num2(v) {
  return typeof v === "number" ? v.toFixed(3) : "-";
}

// ---- lessons --------------------------------------------------------------

// A notice naming a message: the page's words, the message's fields
// isolated (a right-to-left override in an id turns none of ours).
function noticeOf(ok, ...parts) {
  clear($("notice")).append(...parts.map((p) => (typeof p === "string" ? p : field(p.v))));
  $("notice").classList.toggle("ok", ok);
}

async function teach(entry, label) {
  const lesson = { id: entry.id, label };
  // The message goes with its label when the page has it whole (a scan,
  // a raw e-mail the history kept, a kept text under the history's cut):
  // the lesson then survives a crash whatever the record held. An e-mail
  // is never taught by the text shown (its rendering): without the e-mail
  // itself, and for anything cut, the label names the message the record
  // knows by its id.
  if (entry.email) lesson.email = entry.email;
  else if (!entry.mail && entry.text && state.access.keep_text !== false && entry.text.length < 4000) lesson.text = entry.text;
  if (entry.user) lesson.user = entry.user;
  try {
    const r = await api("teach", lesson);
    if (r.changed) noticeOf(true, "Taught ", { v: entry.id }, " as ", { v: label }, ".");
    else noticeOf(true, { v: entry.id }, " was ", { v: label }, " already.");
    return r;
  } catch (e) {
    noticeOf(false, "Not taught: ", { v: e.message });
    throw e;
  }
}

async function forget(entry) {
  try {
    const r = await api("teach", { id: entry.id, forget: true });
    if (r.changed) noticeOf(true, "Forgot the label of ", { v: entry.id }, ".");
    else noticeOf(true, { v: entry.id }, " was never labeled: nothing to forget.");
    return r;
  } catch (e) {
    noticeOf(false, "Not forgotten: ", { v: e.message });
    throw e;
  }
}

// ---- review ---------------------------------------------------------------

async function loadReview() {
  const r = await api("review", { limit: 100 });
  setClasses(r.classes);
  state.review.items = r.items;
  state.review.at = 0;
  $("review-count").textContent = r.left ? String(r.left) : "";
  await showReviewItem(r.left);
}

async function showReviewItem(left) {
  const { items, at } = state.review;
  const item = items[at];
  const box = clear($("review-item"));
  const remaining = left !== undefined ? left : Math.max(0, items.length - at);
  $("review-left").textContent = remaining + " left to review";
  $("review-left").dataset.left = String(remaining);
  clear($("review-keys"));
  if (!item) {
    $("review-done").textContent = "Nothing waits for review.";
    return;
  }
  $("review-done").textContent = "";
  box.dataset.id = item.id;
  box.dataset.mail = item.mail ? "1" : "";
  box.append(
    el("p", {}, "Predicted ", labelSpan(item.label), ` (margin ${num2(item.margin)}) for `, el("code", {}, field(item.id)), item.user ? [" of ", field(item.user)] : null),
    el("pre", {}, el("bdi", { dir: "auto" }, item.text || "(no text kept)")),
  );
  state.classes.forEach((c, i) => {
    if (i < 9) $("review-keys").appendChild(el("button", { type: "button", class: "teach", data: { label: c }, on: { click: () => press(() => decide(c)) } }, `${i + 1} `, field(c)));
  });
  try {
    const look = await api("look", { id: item.id });
    const why = el("table", {}, row(["feature", "adds"], true), ...(look.explanation || []).map((c) => row([c.feature, num2(c.contribution)])));
    box.append(el("h2", {}, "Why"), why);
  } catch (_) {
    // The entry may have left the history; its text is shown all the same.
  }
}

// Review keys are queued and applied one at a time, in order: each to the
// message shown when its turn comes, that is after the answer to the key
// before it (keys typed ahead teach the next messages, one each). A key
// that fails drops the keys queued after it: they were meant for messages
// the reviewer had not seen yet.
function press(action) {
  state.review.keys.push(action);
  if (!state.review.busy) drain();
}

async function drain() {
  state.review.busy = true;
  try {
    while (state.review.keys.length) {
      const action = state.review.keys.shift();
      try {
        await action();
      } catch (_) {
        state.review.keys.length = 0;
      }
    }
  } finally {
    state.review.busy = false;
  }
}

async function decide(label) {
  const item = state.review.items[state.review.at];
  if (!item || !state.access.write) return;
  const before = item.taught || null;
  await teach(item, label);
  state.review.undo.push({ item, before });
  item.taught = label;
  await next();
}

// The next message to review; past the last one loaded, the next ones.
async function next() {
  state.review.at += 1;
  if (state.review.at >= state.review.items.length) await loadReview();
  else await showReviewItem();
}

async function undo() {
  const last = state.review.undo.pop();
  if (!last) return;
  if (last.before) await teach(last.item, last.before);
  else await forget(last.item);
  last.item.taught = last.before;
  // The message waits for review again: it is shown, to be decided anew.
  let at = state.review.items.indexOf(last.item);
  if (at < 0) {
    state.review.items.splice(state.review.at, 0, last.item);
    at = state.review.at;
  }
  state.review.at = at;
  await showReviewItem();
}

function onKey(ev) {
  const t = ev.target;
  if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable)) return;
  if (ev.key === "?") {
    $("help").hidden = !$("help").hidden;
    ev.preventDefault();
    return;
  }
  if (ev.key === "Escape") {
    $("help").hidden = true;
    return;
  }
  if (state.page !== "review") return;
  if (/^[1-9]$/.test(ev.key)) {
    const n = Number(ev.key) - 1;
    press(() => (state.classes[n] ? decide(state.classes[n]) : null));
  } else if (ev.key === "Enter") {
    press(() => {
      const shown = state.review.items[state.review.at];
      return shown ? decide(shown.label) : null;
    });
  } else if (ev.key === " ") {
    press(next);
  } else if (ev.key === "Backspace" || (ev.key.toLowerCase() === "z" && (ev.ctrlKey || ev.metaKey))) {
    press(undo);
  } else {
    return;
  }
  ev.preventDefault();
}

// ---- reporters ------------------------------------------------------------

async function showReporters() {
  const { reporters } = await api("reporters");
  const table = clear($("reporters"));
  table.appendChild(row(["reporter", "trust", "labels", "held", "overridden", "in the record", "latest lessons", ""], true));
  for (const r of reporters) {
    const forgetting = state.access.operator && r.in_record && r.name !== "" ? forgetReporterButton(r) : null;
    table.appendChild(el("tr", { data: { reporter: r.name } },
      el("td", {}, field(r.name === "" ? "(nobody named)" : r.name, "reviewer")),
      el("td", { class: "num" }, r.trusted ? "trusted" : num(r.trust, 3)),
      el("td", { class: "num" }, r.labels),
      el("td", { class: "num" }, r.held),
      el("td", { class: "num" }, r.overridden),
      el("td", { class: "num" }, r.in_record),
      el("td", {}, r.latest.flatMap((id, i) => [i ? ", " : "", field(id)])),
      el("td", {}, forgetting),
    ));
  }
}

// Forgets every label of a reporter's the record holds: a second click
// confirms (no dialog: a page of hostile content keeps dialogs for alarms).
function forgetReporterButton(r) {
  const b = el("button", { type: "button", class: "teach forget-reporter" }, "forget");
  b.addEventListener("click", async () => {
    if (!b.dataset.armed) {
      b.dataset.armed = "1";
      clear(b).append("forget ", String(r.in_record), " labels? click again");
      return;
    }
    try {
      const res = await api("forget_reporter", { reporter: r.name });
      if (res.changed) noticeOf(true, "Forgot every label of ", { v: r.name }, " the record held.");
      else noticeOf(true, { v: r.name }, " has no label in the record.");
    } catch (e) {
      noticeOf(false, "Not forgotten: ", { v: e.message });
    }
    await showReporters();
  });
  return b;
}

// ---- scan -----------------------------------------------------------------

async function scan(ev) {
  ev.preventDefault();
  const text = $("scan-text").value;
  if (!text.trim()) return;
  const msg = $("scan-email").checked ? { email: text } : { text };
  if ($("scan-user").value) msg.user = $("scan-user").value;
  try {
    const p = await api("scan", msg);
    state.scanned = Object.assign({}, msg, { id: p.id });
    showScanned(p);
  } catch (e) {
    notice("Not scanned: " + e.message);
  }
}

function showScanned(p) {
  const box = clear($("scan-result"));
  box.dataset.id = p.id;
  const margins = pairs(p.margins).flatMap(([c, m], i) => [i ? ", " : "", field(c), ` ${num2(m)}`]);
  const label = p.label !== undefined ? p.label : (p.labels || [])[0];
  box.dataset.label = label || "";
  box.append(
    el("p", {}, "Predicted ", labelSpan(label), " for ", el("code", {}, field(p.id)), margins.length ? [" (margins: ", ...margins, ")"] : ""),
    el("table", {}, row(["feature", "adds"], true), ...(p.explanation || []).map((c) => row([c.feature, num2(c.contribution)]))),
  );
  if (p.members) box.append(el("p", { class: "hint" }, "Members: " + pairs(p.members).map(([m, s]) => `${m} ${num2(s)}`).join(", ")));
  box.append(teachButtons(state.scanned, () => {}));
}

function readFile(file) {
  const r = new FileReader();
  r.onload = () => {
    $("scan-text").value = String(r.result);
    $("scan-email").checked = /\.eml$/i.test(file.name) || /^[A-Za-z-]+: /.test(String(r.result));
  };
  r.readAsText(file);
}

// ---- model ----------------------------------------------------------------

async function showModel() {
  const { classes } = await api("model");
  const box = clear($("model"));
  for (const [c, feats] of classes) {
    box.appendChild(el("div", {}, el("h2", {}, labelSpan(c)), el("table", {}, row(["feature", "weight"], true), ...feats.map(([f, w]) => row([f, num2(w)])))));
  }
}

// ---- pages ----------------------------------------------------------------

const pages = { status: showStatus, history: showHistory, review: loadReview, reporters: showReporters, scan: async () => {}, model: showModel };

async function show(page) {
  state.page = pages[page] ? page : "status";
  for (const s of document.querySelectorAll(".page")) s.classList.toggle("on", s.id === "page-" + state.page);
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("on", a.dataset.page === state.page);
  if (!state.access.read && !(await login())) return;
  try {
    await pages[state.page]();
  } catch (e) {
    notice(e.status === 401 ? "Log in: this console asks for a secret." : "Error: " + e.message);
  }
}

function refresh() {
  if (document.hidden || state.page !== "status") return;
  showStatus().catch(() => {});
}

function start() {
  $("logout").addEventListener("click", logout);
  $("login").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    state.secret = $("secret").value;
    sessionStorage.setItem("classifyd-secret", state.secret);
    $("secret").value = "";
    if (await login()) show(state.page);
  });
  $("history-filter").addEventListener("submit", (ev) => {
    ev.preventDefault();
    showHistory().catch((e) => notice("Error: " + e.message));
  });
  $("history-older").addEventListener("click", () => showHistory(true).catch((e) => notice("Error: " + e.message)));
  $("history-export").addEventListener("click", () => exportHistory().catch((e) => notice("Not exported: " + e.message)));
  $("scan-form").addEventListener("submit", scan);
  $("scan-file").addEventListener("change", (ev) => ev.target.files[0] && readFile(ev.target.files[0]));
  const drop = $("scan-text");
  drop.addEventListener("dragover", (ev) => ev.preventDefault());
  drop.addEventListener("drop", (ev) => {
    ev.preventDefault();
    if (ev.dataTransfer.files[0]) readFile(ev.dataTransfer.files[0]);
  });
  document.addEventListener("keydown", onKey);
  document.addEventListener("visibilitychange", refresh);
  window.addEventListener("hashchange", () => show(location.hash.slice(1)));
  const keys = [["1..9", "teach the class of that number"], ["Enter", "accept the prediction"], ["Space", "skip"], ["Backspace, Ctrl+Z", "undo the last decision"], ["?", "this help"]];
  $("help-keys").append(...keys.map(([k, d]) => row([el("kbd", {}, k), d])));
  state.timer = setInterval(refresh, 3000);
  show(location.hash.slice(1) || "status");
}

document.addEventListener("DOMContentLoaded", start);
