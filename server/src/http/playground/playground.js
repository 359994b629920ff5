// The Quorum playground: lists the databases, shows a schema, asks /v1/sql for a streamed
// answer and draws the evidence (candidates, vote groups, selector, linking, timings).
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "quorum.token";

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

function cell(v) {
  if (!v) return "";
  if (v.null) return "NULL";
  if ("text" in v) return v.text;
  if ("integer" in v) return v.integer;
  if ("real" in v) return v.real;
  if ("blob" in v) return `<blob ${atob(v.blob).length} bytes>`;
  return "";
}

function setStatus(text, kind) {
  const s = $("status");
  s.textContent = text;
  s.className = kind || "";
}

async function loadDatabases() {
  const select = $("database");
  select.replaceChildren();
  try {
    const listed = await api("/v1/databases");
    const dbs = listed.databases || [];
    for (const db of dbs) {
      select.append(el("option", { value: db.dbId }, `${db.dbId} (${db.tableCount || 0} tables)`));
    }
    const note = $("database-note");
    note.hidden = !listed.note;
    note.textContent = listed.note || "";
    const preferred = dbs.find((d) => d.dbId === "concert_singer");
    if (preferred) select.value = preferred.dbId;
    if (dbs.length) await loadSchema(select.value);
  } catch (e) {
    setStatus(e.message, "error");
  }
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

function renderRows(preview) {
  const box = $("answer-rows");
  box.replaceChildren();
  if (!preview) {
    box.append(el("p", { class: "note" }, "The final SQL did not execute."));
    return;
  }
  const head = el("tr", {}, (preview.columns || []).map((c) => el("th", {}, c)));
  const rows = (preview.rows || []).map((r) => el("tr", {}, (r.values || []).map((v) => el("td", {}, cell(v)))));
  const total = Number(preview.totalRows || 0);
  box.append(el("table", { id: "rows" }, el("thead", {}, head), el("tbody", {}, rows)));
  box.append(el("p", { class: "note" }, `${total} row${total === 1 ? "" : "s"}${preview.truncated ? " (cut short)" : ""}`));
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
      body: JSON.stringify({ dbId, question }),
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

$("token").value = localStorage.getItem(TOKEN_KEY) || "";
$("token").addEventListener("change", () => {
  localStorage.setItem(TOKEN_KEY, $("token").value.trim());
  loadDatabases();
});
$("database").addEventListener("change", () => loadSchema($("database").value).catch((e) => setStatus(e.message, "error")));
$("ask").addEventListener("submit", ask);
loadDatabases();
