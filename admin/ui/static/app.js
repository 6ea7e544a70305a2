// The dbos-agent dashboard: plain JavaScript over the admin server's JSON
// endpoints (/ui/api/* for the reads, in the page's own shapes with every
// value decoded, and DBOS's POST /workflows/{id}/cancel|resume|fork for the
// actions). No framework, nothing fetched from elsewhere: the page works
// offline.
"use strict";

const state = { offset: 0, limit: 50, filters: {}, selected: null, shown: 0 };
const $ = (sel) => document.querySelector(sel);

const tokenInput = $("#token");
tokenInput.value = sessionStorage.getItem("dbos-agent-token") || "";
tokenInput.addEventListener("change", () => {
  sessionStorage.setItem("dbos-agent-token", tokenInput.value);
  refresh();
});

function say(text, ok) {
  const m = $("#message");
  m.textContent = text || "";
  m.className = ok ? "ok" : "";
}

// cleared drops an error message once a read works again (a message that
// reports an action's success stays).
function cleared() {
  if ($("#message").className !== "ok") say("");
}

async function call(method, path, body) {
  const headers = {};
  if (tokenInput.value) headers["Authorization"] = "Bearer " + tokenInput.value;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await resp.text();
  if (!resp.ok) {
    let detail = text;
    try { detail = JSON.parse(text).error || text; } catch (_) { /* not JSON */ }
    throw new Error(method + " " + path + ": " + resp.status + (detail ? " " + detail : ""));
  }
  return text ? JSON.parse(text) : null;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function when(ms) {
  if (ms === null || ms === undefined) return "";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}

function duration(start, end) {
  if (start == null || end == null) return "";
  const ms = end - start;
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(2) + " s";
  return (ms / 60000).toFixed(1) + " min";
}

function statusBadge(s) { return el("span", { class: "status " + s }, s); }
function value(v, isError) {
  if (v === null || v === undefined) return el("span", { class: "muted" }, "—");
  return el("pre", { class: isError ? "error" : "" }, v);
}

// The workflow list: the filters, newest first unless asked otherwise.
async function loadWorkflows() {
  const f = state.filters;
  const q = new URLSearchParams({ limit: state.limit, offset: state.offset });
  for (const k of ["status", "name", "queue", "prefix", "user", "version", "order"]) if (f[k]) q.set(k, f[k]);
  // The time inputs are in the browser's zone; the agent takes RFC 3339.
  for (const k of ["created_after", "created_before"]) if (f[k]) q.set(k, new Date(f[k]).toISOString());
  const rows = await call("GET", "/ui/api/workflows?" + q);
  const tbody = $("#workflows tbody");
  tbody.replaceChildren(...rows.map((w) => {
    const tr = el("tr", { "data-id": w.id, onclick: () => openWorkflow(w.id) },
      el("td", {}, w.id), el("td", {}, w.name), el("td", {}, statusBadge(w.status)),
      el("td", {}, w.queue_name || ""), el("td", {}, w.app_version || ""), el("td", {}, when(w.created_at)), el("td", {}, when(w.updated_at)));
    if (w.id === state.selected) tr.classList.add("selected");
    return tr;
  }));
  if (rows.length === 0) tbody.append(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No workflows match.")));
  $("#page").textContent = rows.length ? `${state.offset + 1}–${state.offset + rows.length}` : "";
  $("#prev").disabled = state.offset === 0;
  $("#next").disabled = rows.length < state.limit;
}

// openWorkflow shows a workflow, saying what went wrong if it cannot.
async function openWorkflow(id) {
  try { await showWorkflow(id); } catch (e) { say(e.message); }
}

// A workflow: its fields, its steps as a timeline, its children, events,
// messages and streams, every value decoded by the agent. Only the latest
// of overlapping reads is drawn (a slow answer for a workflow clicked
// before does not replace the one clicked after).
async function showWorkflow(id) {
  state.selected = id;
  const seq = ++state.shown;
  document.querySelectorAll("#workflows tbody tr").forEach((tr) => tr.classList.toggle("selected", tr.dataset.id === id));
  const d = await call("GET", "/ui/api/workflows/" + encodeURIComponent(id));
  if (seq !== state.shown) return;
  const w = d.workflow;
  const detail = $("#detail");
  const fields = [
    ["ID", w.id], ["Name", w.name + (w.class_name ? " (" + w.class_name + ")" : "")], ["Status", statusBadge(w.status)],
    ["Queue", w.queue_name || ""], ["Executor", w.executor_id || ""], ["Version", w.app_version || ""],
    ["Created", when(w.created_at)], ["Started", when(w.started_at)], ["Completed", when(w.completed_at)],
    ["Duration", duration(w.created_at, w.completed_at)], ["Recovery attempts", w.recovery_attempts],
    ["Serialization", w.serialization || ""],
  ];
  if (w.parent_workflow_id) fields.push(["Parent", wfLink(w.parent_workflow_id)]);
  if (w.forked_from) fields.push(["Forked from", wfLink(w.forked_from)]);
  const dl = el("dl", {});
  for (const [k, v] of fields) dl.append(el("dt", {}, k), el("dd", {}, v));
  dl.append(el("dt", {}, "Input"), el("dd", {}, value(w.input)));
  dl.append(el("dt", {}, "Output"), el("dd", {}, value(w.output)));
  if (w.error) dl.append(el("dt", {}, "Error"), el("dd", {}, value(w.error, true)));

  const actions = el("div", { class: "actions" },
    el("button", { id: "cancel", onclick: () => act(w.id, "cancel") }, "Cancel"),
    el("button", { id: "resume", onclick: () => act(w.id, "resume") }, "Resume"),
    forkForm(w));

  detail.replaceChildren(el("h2", {}, "Workflow " + w.id), actions, dl,
    el("h3", {}, `Steps (${d.steps.length})`), stepsTable(d.steps),
    section("children", "Children", d.children, ["Workflow"], (c) => [wfLink(c)]),
    section("events", "Events", d.events, ["Key", "Step", "Value"], (e) => [e.key, e.function_id, value(e.value)]),
    section("messages", "Messages", d.messages, ["Topic", "Sent", "Consumed", "Value"], (m) => [m.topic ?? "(default)", when(m.created_at), m.consumed ? "yes" : "no", value(m.value)]),
    section("streams", "Streams", d.streams, ["Key", "Offset", "Step", "Value"], (s) => [s.key, s.offset, s.function_id,
      s.closed ? el("span", { class: "muted" }, "(closed)") : value(s.value)]));
  detail.hidden = false;
}

function wfLink(id) { return el("a", { href: "#", "data-id": id, onclick: (ev) => { ev.preventDefault(); openWorkflow(id); } }, id); }

// section is a titled table of rows, with an id for each pane.
function section(id, title, rows, heads, cells) {
  const frag = el("div", { id: id, class: "section" }, el("h3", {}, `${title} (${rows.length})`));
  if (rows.length === 0) { frag.append(el("p", { class: "muted" }, "None.")); return frag; }
  frag.append(el("table", {}, el("thead", {}, el("tr", {}, ...heads.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows.map((r) => el("tr", {}, ...cells(r).map((c) => el("td", {}, c)))))));
  return frag;
}

// stepsTable draws each step's span against the whole run's.
function stepsTable(steps) {
  const starts = steps.map((s) => s.started_at).filter((t) => t != null);
  const ends = steps.map((s) => s.completed_at ?? s.started_at).filter((t) => t != null);
  const t0 = Math.min(...starts), t1 = Math.max(...ends);
  const span = Math.max(t1 - t0, 1);
  const rows = steps.map((s) => {
    const bar = el("div", { class: "bar" });
    if (s.started_at != null) {
      const left = ((s.started_at - t0) / span) * 100;
      const width = (((s.completed_at ?? s.started_at) - s.started_at) / span) * 100;
      bar.append(el("span", { class: s.error ? "error" : "", style: `left:${left}%;width:${width}%` }));
    }
    return el("tr", { class: "step" }, el("td", {}, s.function_id), el("td", {}, s.name),
      el("td", {}, when(s.started_at)), el("td", {}, when(s.completed_at)), el("td", {}, duration(s.started_at, s.completed_at)),
      el("td", { class: "timeline" }, bar),
      el("td", {}, s.child_workflow_id ? wfLink(s.child_workflow_id) : ""),
      el("td", { class: "output" }, s.error ? value(s.error, true) : value(s.output)));
  });
  if (steps.length === 0) return el("p", { class: "muted" }, "No steps recorded.");
  return el("table", { id: "steps" }, el("thead", {}, el("tr", {}, ...["#", "Step", "Started", "Completed", "Duration", "Timeline", "Child", "Output / error"].map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows));
}

async function act(id, what) {
  if (!confirm(`${what[0].toUpperCase() + what.slice(1)} workflow ${id}?`)) return;
  try {
    await call("POST", `/workflows/${encodeURIComponent(id)}/${what}`);
    say(`${what}: ${id} done`, true);
    await Promise.all([loadWorkflows(), showWorkflow(id)]);
  } catch (e) { say(e.message); }
}

// forkForm asks what DBOS's fork takes: the first step to run anew (the
// steps below it are copied; 1 reruns every step), and optionally the
// fork's id (default a new UUID) and the application version to run it
// (default the original's).
function forkForm(w) {
  const form = el("form", { id: "fork-form", class: "fork" },
    el("label", {}, "Start step ", el("input", { name: "start_step", type: "number", min: "0", step: "1", value: "1", required: "" })),
    el("label", {}, "New workflow ID ", el("input", { name: "new_workflow_id", placeholder: "(a new UUID)" })),
    el("label", {}, "Application version ", el("input", { name: "application_version", placeholder: w.app_version ? `(${w.app_version})` : "(the original's)" })),
    el("button", { id: "fork", type: "submit" }, "Fork"));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); fork(w.id, new FormData(form)); });
  return form;
}

async function fork(id, data) {
  const start = String(data.get("start_step")).trim();
  const n = Number(start);
  if (start === "" || !Number.isInteger(n) || n < 0) { say("fork: the start step is a whole number, 0 or more"); return; }
  const newID = String(data.get("new_workflow_id")).trim(), version = String(data.get("application_version")).trim();
  const body = { start_step: n };
  if (newID) body.new_workflow_id = newID;
  if (version) body.application_version = version;
  if (!confirm(`Fork workflow ${id} from step ${n}${newID ? " as " + newID : ""}${version ? " on version " + version : ""}?`)) return;
  try {
    const r = await call("POST", `/workflows/${encodeURIComponent(id)}/fork`, body);
    say(`forked ${id} as ${r.workflow_id}`, true);
    await loadWorkflows();
    await showWorkflow(r.workflow_id);
  } catch (e) { say(e.message); }
}

function fill(tableSel, rows, cells) {
  const tbody = document.querySelector(tableSel + " tbody");
  tbody.replaceChildren(...rows.map((r) => el("tr", {}, ...cells(r).map((c) => el("td", {}, c ?? "")))));
  if (rows.length === 0) tbody.append(el("tr", {}, el("td", { class: "muted", colspan: 10 }, "None.")));
}

const panes = {
  workflows: loadWorkflows,
  queues: async () => fill("#queues", await call("GET", "/ui/api/queues"), (q) => [q.name, q.application, q.concurrency, q.worker_concurrency,
    q.rate_limit_max != null ? `${q.rate_limit_max} / ${q.rate_limit_period_sec} s` : "", q.priority_enabled ? "yes" : "no",
    q.partitioned ? "yes" : "no", q.enqueued, q.pending, q.delayed]),
  schedules: async () => fill("#schedules", await call("GET", "/ui/api/schedules"), (s) => [s.name, s.workflow_name, s.cron, s.timezone || "UTC", s.status, s.last_fired_at]),
  versions: async () => fill("#versions", await call("GET", "/ui/api/versions"), (v) => [v.name, v.application, when(v.timestamp), when(v.created_at)]),
};
let current = "workflows";

async function refresh() {
  try { await panes[current](); cleared(); } catch (e) { say(e.message); }
}

// Auto-refresh reloads the open pane's table (not the workflow shown below
// it, whose fork fields may be half typed) every few seconds.
let timer = null;
$("#auto-refresh").addEventListener("change", (ev) => {
  clearInterval(timer);
  timer = ev.target.checked ? setInterval(refresh, 2000) : null;
});

document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => {
  current = b.dataset.pane;
  document.querySelectorAll("nav button").forEach((o) => o.classList.toggle("active", o === b));
  document.querySelectorAll(".pane").forEach((p) => { p.hidden = p.id !== "pane-" + current; });
  refresh();
}));

$("#filters").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const data = new FormData(ev.target);
  state.filters = {};
  for (const k of ["status", "name", "queue", "prefix", "user", "version", "created_after", "created_before", "order"]) {
    state.filters[k] = String(data.get(k) || "").trim();
  }
  state.limit = parseInt(data.get("limit"), 10);
  state.offset = 0;
  refresh();
});
$("#prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); refresh(); });
$("#next").addEventListener("click", () => { state.offset += state.limit; refresh(); });

refresh();
