// tablekit studio: every name and value is written as text (textContent),
// never as markup; the token goes with every request.
"use strict";

const studio = document.getElementById("studio");
const token = studio.dataset.token;
const state = { table: null, filter: "", pages: [], next: null, row: null, write: false, partitionsAfter: null };

// Characters that would change how the text around them reads (direction
// marks and overrides, zero-width ones) are shown as their code points.
const HIDDEN = /[\u061C\u200B-\u200F\u202A-\u202E\u2060-\u2069\uFEFF]/g;

function visible(text) {
  return String(text).replace(HIDDEN, (c) => "\u27E8U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + "\u27E9");
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = visible(text);
  if (className) node.className = className;
  return node;
}

function say(id, text, className) {
  const node = document.getElementById(id);
  node.textContent = text;
  node.className = className || "";
}

async function api(path, options) {
  const init = Object.assign({ headers: {} }, options || {});
  init.headers["X-Studio-Token"] = token;
  const response = await fetch(path, init);
  let body = null;
  const text = await response.text();
  if (text) {
    try { body = JSON.parse(text); } catch (_) { body = { error: text }; }
  }
  return { status: response.status, body: body };
}

function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined) search.set(name, value);
  }
  return search.toString();
}

// Where the page stands, in its address: #table=…&filter=…
function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  return { table: params.get("table"), filter: params.get("filter") || "" };
}

function writeHash() {
  const params = new URLSearchParams();
  if (state.table) params.set("table", state.table);
  if (state.filter) params.set("filter", state.filter);
  history.replaceState(null, "", "#" + params.toString());
}

async function loadStore() {
  const { body } = await api("/api/store");
  if (!body) return;
  say("store", body.store);
  state.write = !!body.write;
  say("mode", body.write ? "read and write" : "read-only");
}

async function loadTables() {
  const { status, body } = await api("/api/tables");
  const list = document.getElementById("tables");
  list.replaceChildren();
  if (status !== 200) {
    list.append(el("li", body && body.error, "error"));
    return;
  }
  for (const name of body.tables) {
    const button = el("button", name);
    button.type = "button";
    button.dataset.table = name;
    if (name === state.table) button.classList.add("current");
    button.addEventListener("click", () => openTable(name));
    const item = el("li");
    item.append(button);
    list.append(item);
  }
}

async function openTable(name) {
  state.table = name;
  state.pages = [];
  state.next = null;
  document.getElementById("table-name").textContent = name;
  say("upkeep-state", "");
  for (const button of document.querySelectorAll("#tables button")) {
    button.classList.toggle("current", button.dataset.table === name);
  }
  document.getElementById("partitions").replaceChildren();
  state.partitionsAfter = null;
  await loadPage(null);
  await loadPartitions();
  await loadFeeds();
}

// The table's partitions, 50 at a time; one clicked shows its rows alone.
async function loadPartitions() {
  const { status, body } = await api("/api/partitions?" + query({ table: state.table, after: state.partitionsAfter }));
  const list = document.getElementById("partitions");
  const more = document.getElementById("more-partitions");
  if (status !== 200) {
    list.append(el("li", (body && body.error) || "the store said " + status, "error"));
    more.hidden = true;
    return;
  }
  for (const pk of body.partitions) {
    const button = el("button", pk);
    button.type = "button";
    button.addEventListener("click", () => openPartition(pk));
    const item = el("li");
    item.append(button);
    list.append(item);
  }
  state.partitionsAfter = body.next;
  more.hidden = !body.next;
}

// The consumers of the table's change feeds, and how far behind each is.
async function loadFeeds() {
  const { status, body } = await api("/api/feeds?" + query({ table: state.table }));
  const section = document.getElementById("feeds");
  const tbody = document.querySelector("#consumers tbody");
  tbody.replaceChildren();
  section.hidden = status !== 200 || body.consumers.length === 0;
  if (section.hidden) return;
  for (const c of body.consumers) {
    const tr = el("tr");
    tr.append(el("td", c.consumer), el("td", c.partition), el("td", String(c.checkpoint)),
      el("td", String(c.newest)), el("td", String(c.lag)));
    tbody.append(tr);
  }
}

async function loadPage(start) {
  writeHash();
  const params = { table: state.table, filter: state.filter || null, top: 100 };
  if (start) {
    params.next_pk = start.pk;
    if (start.rk !== null && start.rk !== undefined) params.next_rk = start.rk;
  }
  say("message", "Reading…");
  const { status, body } = await api("/api/rows?" + query(params));
  const tbody = document.querySelector("#rows tbody");
  if (status !== 200) {
    say("message", (body && body.error) || "the store said " + status, "error");
    return;
  }
  tbody.replaceChildren();
  for (const row of body.rows) {
    const tr = el("tr");
    if (row.error) {
      tr.append(el("td", row.error, "error"));
      tbody.append(tr);
      continue;
    }
    if (row.role.startsWith("tablekit")) tr.classList.add("bookkeeping");
    const pk = el("td", row.pk, "partition");
    pk.title = "show this partition alone";
    pk.addEventListener("click", (event) => {
      event.stopPropagation();
      openPartition(row.pk);
    });
    tr.append(pk, el("td", row.rk), el("td", row.role), el("td", row.timestamp || ""),
      el("td", String(row.properties.length)));
    tr.addEventListener("click", () => showRow(row, tr));
    tbody.append(tr);
  }
  state.pages.push(start);
  state.next = body.next;
  document.getElementById("next").disabled = !body.next;
  say("message", body.rows.length + " rows" + (body.next ? "; more follow" : ""));
  say("page-info", "Page " + state.pages.length);
}

// The rows of one partition: a filter on its key, quoted as the service
// quotes a string (a ' doubled).
function openPartition(pk) {
  state.filter = "PartitionKey eq '" + pk.replace(/'/g, "''") + "'";
  document.getElementById("filter").value = state.filter;
  state.pages = [];
  loadPage(null);
}

function showRow(row, tr) {
  state.row = row;
  for (const other of document.querySelectorAll("#rows tr.current")) other.classList.remove("current");
  if (tr) tr.classList.add("current");
  document.getElementById("row-view").hidden = false;
  const keys = document.getElementById("row-keys");
  keys.replaceChildren();
  for (const [name, value] of [["PartitionKey", row.pk], ["RowKey", row.rk], ["What", row.role],
    ["ETag", row.etag || ""], ["Timestamp", row.timestamp || ""]]) {
    keys.append(el("dt", name), el("dd", value));
  }
  const tbody = document.querySelector("#properties tbody");
  tbody.replaceChildren();
  for (const p of row.properties) {
    const tr = el("tr");
    tr.append(el("td", p.name), el("td", p.type), el("td", p.value));
    tbody.append(tr);
  }
  document.getElementById("row-json").textContent = visible(row.json);
  document.getElementById("audit").hidden = true;
  const editor = document.getElementById("editor");
  editor.hidden = !state.write;
  document.getElementById("edit-json").value = row.json;
  say("edit-message", "");
}

// The audit of the shown row's partition, from its raw rows: index rows
// whose entity is gone, stale copies, list entries naming nothing.
async function verify() {
  const { status, body } = await api("/api/verify?" + query({ table: state.table, pk: state.row.pk }));
  const section = document.getElementById("audit");
  const list = document.getElementById("audit-problems");
  section.hidden = false;
  list.replaceChildren();
  if (status !== 200) {
    say("audit-summary", (body && body.error) || "the store said " + status, "error");
    return;
  }
  const problems = body.orphans.length + body.stale.length + body.dangling.length;
  say("audit-summary", body.index_rows + " index rows beside " + body.entities + " entities: " +
    (problems === 0 ? "all in step" : problems + " out of step"), problems === 0 ? "" : "error");
  for (const [rk, pointed] of body.orphans) list.append(el("li", "index row " + rk + " names " + pointed + ", which is gone"));
  for (const [rk, property] of body.stale) list.append(el("li", "index row " + rk + " copies a " + property + " its entity no longer holds"));
  for (const [rk, member] of body.dangling) list.append(el("li", "index entity " + rk + " lists " + member + ", which is gone"));
}

// What the upkeep has still to do in the table (a read of the whole
// table's outbox records: asked for, not read with every page).
async function upkeep() {
  if (!state.table) return;
  const { status, body } = await api("/api/upkeep?" + query({ table: state.table }));
  if (status !== 200) {
    say("upkeep-state", (body && body.error) || "the store said " + status, "error");
    return;
  }
  say("upkeep-state", body.outbox_records + " outbox records waiting; " + body.expiring +
    " entities that expire, " + body.expired + " of them due for the sweep");
}

function rowParams() {
  return "/api/row?" + query({ table: state.table, pk: state.row.pk, rk: state.row.rk });
}

async function save() {
  const { status, body } = await api(rowParams(), {
    method: "PUT",
    headers: { "If-Match": state.row.etag },
    body: document.getElementById("edit-json").value,
  });
  await afterWrite(status, body, "Saved.");
}

async function remove() {
  const { status, body } = await api(rowParams(), {
    method: "DELETE",
    headers: { "If-Match": state.row.etag },
  });
  await afterWrite(status, body, "Deleted.");
}

async function afterWrite(status, body, done) {
  if (status === 412) {
    say("edit-message", "Conflict: the row changed since it was shown. Nothing was written; read it again.", "conflict");
    return;
  }
  if (status >= 300) {
    say("edit-message", (body && body.error) || "the store said " + status, "error");
    return;
  }
  const { status: read, body: row } = await api(rowParams());
  if (read === 200) showRow(row, null);
  // The page the row was on, read again (loadPage counts it once more).
  const page = state.pages.pop();
  await loadPage(page === undefined ? null : page);
  say("edit-message", done);
}

document.getElementById("filter-form").addEventListener("submit", (event) => {
  event.preventDefault();
  if (!state.table) return;
  state.filter = document.getElementById("filter").value.trim();
  state.pages = [];
  loadPage(null);
});
document.getElementById("first").addEventListener("click", () => {
  if (!state.table) return;
  state.pages = [];
  loadPage(null);
});
document.getElementById("next").addEventListener("click", () => {
  if (state.next) loadPage(state.next);
});
document.getElementById("save").addEventListener("click", save);
document.getElementById("delete").addEventListener("click", remove);
document.getElementById("verify").addEventListener("click", verify);
document.getElementById("upkeep").addEventListener("click", upkeep);
document.getElementById("more-partitions").addEventListener("click", loadPartitions);

// Opens what the address names (a table, a filter): at the start, and
// when the address is changed by hand or by a link.
async function follow() {
  const start = readHash();
  state.table = start.table;
  state.filter = start.filter;
  document.getElementById("filter").value = state.filter;
  await loadTables();
  if (state.table) await openTable(state.table);
}

window.addEventListener("hashchange", follow);

(async () => {
  await loadStore();
  await follow();
})();
