// The Quorum playground: lists the databases, shows a schema, asks /v1/sql for a streamed
// answer and draws the evidence (candidates, vote groups, selector, linking, timings). The
// answer's SQL can be edited and run again (read-only, through /v1/databases/{id}/query); a
// result is shown as a table in pages, as a chart when its columns suit one, and as CSV; the
// questions asked are kept in this browser.
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "quorum.token";
const HISTORY_KEY = "quorum.history";
const HISTORY_SIZE = 50;
const PAGE_ROWS = 10;
// More categories than this make a bar chart unreadable.
const CHART_MAX_ROWS = 60;

// The result on screen: its preview, the page shown, and whether the chart is.
const view = { preview: null, page: 0, chart: false };
let allDatabases = [];

function headers(extra) {
  // Names this page in the server's audit trail.
  const h = Object.assign({ "X-Quorum-Client": "playground" }, extra || {});
  const token = $("token").value.trim();
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

async function api(path) {
  const response = await fetch(path, { headers: headers() });
  const body = await response.json();
  if (!response.ok) throw new Error(errorText(body, response.status));
  return body;
}

function errorText(body, status) {
  const e = body && body.error;
  return e ? `${e.code || status}: ${e.message}` : `HTTP ${status}`;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// A cell as shown: cells are plain JSON values (a blob is its base64 text).
function cell(v) {
  return v === null || v === undefined ? "NULL" : String(v);
}

function setStatus(text, kind) {
  const s = $("status");
  s.textContent = text;
  s.className = kind || "";
}

async function loadDatabases() {
  $("database").replaceChildren();
  try {
    const listed = await api("/v1/databases");
    allDatabases = listed.databases || [];
    const note = $("database-note");
    note.hidden = !listed.note;
    note.textContent = listed.note || "";
    const preferred = allDatabases.find((d) => d.dbId === "concert_singer");
    listDatabases(preferred ? preferred.dbId : null);
    if ($("database").value) await loadSchema($("database").value);
  } catch (e) {
    setStatus(e.message, "error");
  }
}

// The databases whose id contains the search text, `chosen` selected when it is among them.
function listDatabases(chosen) {
  const select = $("database");
  const wanted = $("database-search").value.trim().toLowerCase();
  select.replaceChildren();
  for (const db of allDatabases) {
    if (wanted && !db.dbId.toLowerCase().includes(wanted)) continue;
    select.append(el("option", { value: db.dbId }, `${db.dbId} (${db.tableCount || 0} tables)`));
  }
  if (chosen && [...select.options].some((o) => o.value === chosen)) select.value = chosen;
}

async function loadSchema(dbId) {
  const box = $("schema");
  box.replaceChildren();
  const schema = await api("/v1/databases/" + encodeURIComponent(dbId));
  const fks = schema.foreignKeys || [];
  for (const table of schema.tables || []) {
    const pk = new Set(table.primaryKey || []);
    const columns = (table.columns || []).map((c) => {
      const fk = fks.find((f) => f.fromTable === table.name && f.fromColumn === c.name);
      const examples = (c.examples || []).map(cell).slice(0, 3).join(", ");
      return el("li", { title: examples ? "e.g. " + examples : "" },
        pk.has(c.name) ? el("b", {}, c.name) : c.name,
        c.declaredType ? el("span", { class: "type" }, " " + c.declaredType) : null,
        fk ? el("span", { class: "fk" }, ` → ${fk.toTable}.${fk.toColumn}`) : null);
    });
    box.append(el("details", { class: "table" }, el("summary", {}, table.name), el("ul", {}, columns)));
  }
}

function roundName(round) {
  return {
    CANDIDATE_ROUND_PRE_SQL: "PreSQL",
    CANDIDATE_ROUND_FIN_SQL: "FinSQL",
    CANDIDATE_ROUND_REVISION: "revision",
  }[round] || "?";
}

function groupLetter(i) {
  return String.fromCharCode(65 + i);
}

function stageLine(name, data) {
  const text = {
    pre_sql: () => `PreSQL by ${data.model}: ${data.sql}`,
    linked_tables: () => `linked tables: ${(data.tables || []).join(", ")}`,
    candidate: () => `${roundName(data.round)} by ${data.model}: ${data.sql}`,
    vote: () => `vote: ${(data.clusters || []).length} result groups among ${(data.voters || []).length} voters`,
    answer: () => `answer: ${data.sql}`,
    error: () => `error: ${data.error ? data.error.message : ""}`,
  }[name];
  $("stages").append(el("li", { class: name }, text ? text() : name));
}

// Shows a result: its first page as a table (or the chart, if that is the view chosen and the
// columns suit one), the pager, and the CSV link.
function renderRows(preview) {
  view.preview = preview || null;
  view.page = 0;
  const spec = preview ? chartSpec(preview) : null;
  $("show-chart").disabled = !spec;
  if (!spec) view.chart = false;
  const csv = $("csv-link");
  csv.hidden = !preview;
  if (preview) csv.href = "data:text/csv;charset=utf-8," + encodeURIComponent(toCsv(preview));
  drawView();
}

function drawView() {
  const preview = view.preview;
  const box = $("answer-rows");
  box.replaceChildren();
  $("show-table").classList.toggle("active", !view.chart);
  $("show-chart").classList.toggle("active", view.chart);
  $("chart").hidden = !view.chart;
  box.hidden = view.chart;
  $("pager").hidden = true;
  if (!preview) {
    box.hidden = false;
    box.append(el("p", { class: "note" }, "The SQL did not execute."));
    return;
  }
  if (view.chart) {
    drawChart(chartSpec(preview));
    return;
  }
  const all = preview.rows || [];
  const pages = Math.max(1, Math.ceil(all.length / PAGE_ROWS));
  const shown = all.slice(view.page * PAGE_ROWS, (view.page + 1) * PAGE_ROWS);
  const head = el("tr", {}, (preview.columns || []).map((c) => el("th", {}, c)));
  const rows = shown.map((r) => el("tr", {}, r.map((v) => el("td", {}, cell(v)))));
  const total = Number(preview.totalRows || 0);
  box.append(el("table", { id: "rows" }, el("thead", {}, head), el("tbody", {}, rows)));
  box.append(el("p", { class: "note" },
    `${total} row${total === 1 ? "" : "s"}${preview.truncated ? " (cut short)" : ""}` +
    (all.length < total ? `; the first ${all.length} shown` : "")));
  if (pages > 1) {
    $("pager").hidden = false;
    $("page-label").textContent = `page ${view.page + 1} of ${pages}`;
    $("page-prev").disabled = view.page === 0;
    $("page-next").disabled = view.page + 1 >= pages;
  }
}

function turnPage(step) {
  view.page += step;
  drawView();
}

// A cell as a number, or null when it is not one.
function number(v) {
  return typeof v === "number" ? v : null;
}

// How a result can be drawn: labels from the first column that is not all numbers (else the
// first column), values from the first numeric column after it; a line when the labels are
// dates or numbers in order, bars otherwise. Null when the result has no such pair of columns
// or too many rows to draw.
function chartSpec(preview) {
  const columns = preview.columns || [];
  const rows = preview.rows || [];
  if (columns.length < 2 || rows.length < 1 || rows.length > CHART_MAX_ROWS) return null;
  const numeric = columns.map((_, i) => rows.every((r) => number(r[i]) !== null));
  let label = numeric.findIndex((n) => !n);
  if (label < 0) label = 0;
  const value = numeric.findIndex((n, i) => n && i !== label);
  if (value < 0) return null;
  const labels = rows.map((r) => String(cell(r[label])));
  const values = rows.map((r) => number(r[value]));
  const dated = labels.every((l) => /^\d{4}-\d{2}(-\d{2})?/.test(l));
  const ordered = numeric[label] && values.length > 1 &&
    rows.every((r, i) => i === 0 || number(r[label]) >= number(rows[i - 1][label]));
  return { kind: dated || ordered ? "line" : "bar", labels, values, x: columns[label], y: columns[value] };
}

function svg(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function drawChart(spec) {
  const box = $("chart");
  box.replaceChildren();
  const [width, height, left, bottom, top] = [680, 280, 56, 60, 14];
  const plotW = width - left - 10;
  const plotH = height - bottom - top;
  const low = Math.min(0, ...spec.values);
  const high = Math.max(0, ...spec.values) || 1;
  const y = (v) => top + plotH * (1 - (v - low) / (high - low || 1));
  const chart = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, "data-kind": spec.kind,
    role: "img", "aria-label": `${spec.y} by ${spec.x}` });
  chart.append(svg("line", { x1: left, y1: y(0), x2: width - 10, y2: y(0), stroke: "#98a2b3" }));
  for (const tick of [low, (low + high) / 2, high]) {
    chart.append(svg("text", { x: left - 6, y: y(tick) + 4, "text-anchor": "end" }, formatTick(tick)));
  }
  const step = plotW / spec.values.length;
  const centre = (i) => left + step * (i + 0.5);
  const every = Math.ceil(spec.labels.length / 20);
  spec.labels.forEach((label, i) => {
    if (i % every) return;
    const text = label.length > 14 ? label.slice(0, 13) + "…" : label;
    chart.append(svg("text", { x: centre(i), y: height - bottom + 14, "text-anchor": "end",
      transform: `rotate(-35 ${centre(i)} ${height - bottom + 14})` }, text));
  });
  if (spec.kind === "bar") {
    spec.values.forEach((v, i) => {
      const bar = svg("rect", { class: "bar", x: centre(i) - step * 0.35, width: step * 0.7,
        y: Math.min(y(v), y(0)), height: Math.abs(y(0) - y(v)) });
      bar.append(svg("title", {}, `${spec.labels[i]}: ${v}`));
      chart.append(bar);
    });
  } else {
    chart.append(svg("polyline", { class: "line", points: spec.values.map((v, i) => `${centre(i)},${y(v)}`).join(" ") }));
    spec.values.forEach((v, i) => {
      const point = svg("circle", { class: "point", cx: centre(i), cy: y(v), r: 3 });
      point.append(svg("title", {}, `${spec.labels[i]}: ${v}`));
      chart.append(point);
    });
  }
  box.append(chart, el("p", { class: "note" }, `${spec.y} by ${spec.x}`));
}

function formatTick(v) {
  return Math.abs(v) >= 1000 ? v.toExponential(1) : String(Math.round(v * 100) / 100);
}

// The preview as CSV (RFC 4180: fields with a comma, quote or line break quoted).
function toCsv(preview) {
  const field = (text) => (/[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text);
  const lines = [(preview.columns || []).map(field).join(",")];
  for (const row of preview.rows || []) {
    lines.push(row.map((v) => (v === null ? "" : field(String(v)))).join(","));
  }
  return lines.join("\r\n") + "\r\n";
}

function explain(answer, groupOf) {
  const vote = answer.vote || {};
  const clusters = vote.clusters || [];
  const voters = vote.voters || [];
  const chosen = answer.chosenCandidate || 0;
  const winnerGroup = groupOf.get(chosen);
  if (vote.allFailed) return "Every voter's SQL failed to execute; the answer is unverified.";
  if (!clusters.length) return `Candidate #${chosen} is the answer (no vote).`;
  const size = (clusters[winnerGroup] || {}).candidateIds?.length || 0;
  let text = `Group ${groupLetter(winnerGroup)} wins: ${size} of ${voters.length} voters returned the same result.`;
  const sel = vote.selector;
  if (vote.split && sel) {
    if (sel.error) {
      text += ` The vote was split; the selector failed (${sel.error}), so the vote stood.`;
    } else {
      const label = (sel.labels || [])[(sel.shown || []).indexOf(sel.chosen ?? -1)];
      text += ` The vote was split, and the selector model chose ${label || "?"}.`;
    }
  } else if (vote.split) {
    text += " The vote was split; the largest group won.";
  }
  return text;
}

function renderAnswer(answer) {
  $("result").hidden = false;
  $("answer-sql").textContent = answer.sql || "";
  $("edit").hidden = true;
  $("run-status").textContent = "";
  renderRows(answer.preview);
  const vote = answer.vote || {};
  const clusters = vote.clusters || [];
  const groupOf = new Map();
  clusters.forEach((c, i) => (c.candidateIds || []).forEach((id) => groupOf.set(id, i)));
  const chosen = answer.chosenCandidate || 0;
  $("why").textContent = explain(answer, groupOf);

  const groups = $("groups");
  groups.replaceChildren();
  const sel = vote.selector || {};
  clusters.forEach((c, i) => {
    const ids = c.candidateIds || [];
    const won = ids.includes(chosen);
    const shownAt = (sel.shown || []).findIndex((id) => ids.includes(id));
    const logprob = shownAt >= 0 && sel.logprobs ? sel.logprobs[shownAt] : null;
    groups.append(el("div", { class: "group" + (won ? " won" : "") },
      el("strong", {}, `Group ${groupLetter(i)}`),
      ` ${ids.length} vote${ids.length === 1 ? "" : "s"}: ` + ids.map((id) => "#" + id).join(", "),
      logprob !== null ? el("span", { class: "note" }, ` selector log p = ${Number(logprob).toFixed(2)}`) : null,
      won ? el("span", { class: "badge" }, "chosen") : null));
  });

  const body = $("candidates").querySelector("tbody");
  body.replaceChildren();
  for (const c of answer.candidates || []) {
    const id = c.id || 0;
    const result = c.ok ? `${Number(c.ok.rows || 0)} rows` : c.error ? `error: ${c.error.message}` : "";
    const group = groupOf.has(id) ? groupLetter(groupOf.get(id)) : "–";
    body.append(el("tr", { class: (id === chosen ? "chosen " : "") + (c.error ? "failed" : "") },
      el("td", {}, id), el("td", {}, roundName(c.round)), el("td", {}, c.model || ""),
      el("td", {}, el("code", {}, c.sql || "")), el("td", {}, result), el("td", {}, group)));
  }

  const linked = answer.linkedTables;
  $("linked").textContent = linked
    ? (linked.tables || []).join(", ") + (linked.fellBackToAll ? " (linking found none: all tables)" : "")
    : "round 2 did not run";

  const t = answer.timings || {};
  const total = t.totalMs || 1;
  const stages = [["retrieval", t.retrievalMs], ["round 1", t.round1Ms], ["linking", t.linkingMs],
    ["round 2", t.round2Ms], ["revision", t.revisionMs], ["execution", t.executionMs],
    ["vote", t.voteMs], ["selection", t.selectionMs]];
  const bars = $("timings");
  bars.replaceChildren();
  for (const [name, ms] of stages) {
    if (!ms) continue;
    bars.append(el("div", { class: "timing" }, el("span", {}, `${name} ${Math.round(ms)} ms`),
      el("i", { style: `width:${Math.max(1, (100 * ms) / total)}%` })));
  }
  bars.append(el("p", { class: "note" }, `total ${Math.round(total)} ms, ${answer.tokensGenerated || 0} tokens generated`));
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  const evidence = $("evidence").value.trim();
  const dbId = $("database").value;
  if (!question || !dbId) return;
  $("ask-button").disabled = true;
  $("stages").replaceChildren();
  $("result").hidden = true;
  setStatus("asking…");
  try {
    const response = await fetch("/v1/sql?stream=true", {
      method: "POST",
      headers: headers({ "Content-Type": "application/json", "Accept": "text/event-stream" }),
      body: JSON.stringify(Object.assign({ dbId, question }, evidence ? { evidence } : {})),
    });
    if (!response.ok) throw new Error(errorText(await response.json(), response.status));
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let answered = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let name = "message";
        let data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        if (!data) continue;
        const payload = JSON.parse(data);
        stageLine(name, payload);
        if (name === "answer") {
          renderAnswer(payload);
          remember({ dbId, question, evidence, sql: payload.sql || "" });
          answered = true;
        } else if (name === "error") {
          throw new Error(errorText(payload, ""));
        }
      }
    }
    setStatus(answered ? "answered" : "the stream ended without an answer", answered ? "ok" : "error");
  } catch (e) {
    setStatus(e.message, "error");
  } finally {
    $("ask-button").disabled = false;
  }
}

// Runs the edited SQL: read-only, under the same guard and limits as any query.
async function runEdited(event) {
  event.preventDefault();
  const sql = $("sql-editor").value.trim();
  const dbId = $("database").value;
  if (!sql || !dbId) return;
  $("run-sql").disabled = true;
  const status = $("run-status");
  status.className = "";
  status.textContent = "running…";
  try {
    const response = await fetch("/v1/databases/" + encodeURIComponent(dbId) + "/query", {
      method: "POST",
      headers: headers({ "Content-Type": "application/json" }),
      body: JSON.stringify({ sql }),
    });
    const body = await response.json();
    if (!response.ok) throw new Error(errorText(body, response.status));
    renderRows(body.result);
    const total = Number((body.result || {}).totalRows || 0);
    status.textContent = `ran: ${total} row${total === 1 ? "" : "s"}`;
    status.className = "ok";
  } catch (e) {
    status.textContent = e.message;
    status.className = "error";
  } finally {
    $("run-sql").disabled = false;
  }
}

async function copySql() {
  const sql = $("answer-sql").textContent;
  try {
    await navigator.clipboard.writeText(sql);
    setStatus("SQL copied", "ok");
  } catch (e) {
    setStatus("the browser did not allow copying: select the SQL instead", "error");
  }
}

function history() {
  try {
    return JSON.parse(localStorage.getItem(HISTORY_KEY) || "[]");
  } catch (e) {
    return [];
  }
}

function remember(entry) {
  const kept = history().filter((h) => !(h.dbId === entry.dbId && h.question === entry.question));
  kept.unshift(Object.assign({ at: new Date().toISOString() }, entry));
  localStorage.setItem(HISTORY_KEY, JSON.stringify(kept.slice(0, HISTORY_SIZE)));
  drawHistory();
}

function drawHistory() {
  const list = $("history");
  list.replaceChildren();
  for (const h of history()) {
    const item = el("li", { title: h.sql }, `${h.question} `, el("span", { class: "note" }, `(${h.dbId})`));
    item.addEventListener("click", async () => {
      $("database-search").value = "";
      listDatabases(h.dbId);
      $("question").value = h.question;
      $("evidence").value = h.evidence || "";
      if ($("database").value === h.dbId) await loadSchema(h.dbId).catch((e) => setStatus(e.message, "error"));
    });
    list.append(item);
  }
}

$("token").value = localStorage.getItem(TOKEN_KEY) || "";
$("token").addEventListener("change", () => {
  localStorage.setItem(TOKEN_KEY, $("token").value.trim());
  loadDatabases();
});
$("database").addEventListener("change", () => loadSchema($("database").value).catch((e) => setStatus(e.message, "error")));
$("ask").addEventListener("submit", ask);
$("edit").addEventListener("submit", runEdited);
$("edit-sql").addEventListener("click", () => {
  $("edit").hidden = false;
  $("sql-editor").value = $("answer-sql").textContent;
  $("sql-editor").focus();
});
$("copy-sql").addEventListener("click", copySql);
$("show-table").addEventListener("click", () => { view.chart = false; drawView(); });
$("show-chart").addEventListener("click", () => { view.chart = true; drawView(); });
$("page-prev").addEventListener("click", () => turnPage(-1));
$("page-next").addEventListener("click", () => turnPage(1));
$("database-search").addEventListener("input", () => {
  const before = $("database").value;
  listDatabases(before);
  if ($("database").value && $("database").value !== before) {
    loadSchema($("database").value).catch((e) => setStatus(e.message, "error"));
  }
});
drawHistory();
loadDatabases();
