// The report's own script. Captured content is untrusted: it only ever reaches the page
// through textContent, attribute values set by the DOM API, or the canvas; never as HTML.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const C = {};
  data.columns.forEach(function (name, i) { C[name] = i; });
  const calls = data.calls;
  const byId = new Map(calls.map(function (row) { return [row[C.id], row]; }));
  const groups = new Map(data.groups.map(function (g) { return [g.retry_group, g]; }));
  // Names, colours and "is this a failure" come from the analyzer's vocabulary, never spelled here.
  const OUTCOMES = new Map(data.vocabulary.outcomes.map(function (o) { return [o.name, o]; }));
  const colorOf = function (outcome) { return OUTCOMES.has(outcome) ? OUTCOMES.get(outcome).colour : "#667085"; };
  const isFailure = function (outcome) { return !OUTCOMES.has(outcome) || OUTCOMES.get(outcome).failure; };

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  // ---- filters ----------------------------------------------------------------------
  const controls = {
    outcome: document.getElementById("f-outcome"), layer: document.getElementById("f-layer"),
    method: document.getElementById("f-method"), tool: document.getElementById("f-tool"),
    lane: document.getElementById("f-lane"), flag: document.getElementById("f-flag"),
    search: document.getElementById("search"),
  };
  function fill(select, values, label) {
    values.forEach(function (value) {
      const option = el("option", label ? label(value) : value);
      option.value = String(value);
      select.appendChild(option);
    });
  }
  const distinct = function (col) {
    return Array.from(new Set(calls.map(function (r) { return r[C[col]]; }).filter(function (v) { return v !== null && v !== ""; }))).sort();
  };
  fill(controls.outcome, distinct("outcome"));
  fill(controls.layer, distinct("layer"));
  fill(controls.method, distinct("method"));
  fill(controls.tool, distinct("tool"));
  fill(controls.lane, data.lanes.map(function (_, i) { return i; }), function (i) { return data.lanes[i].label; });
  fill(controls.flag, Array.from(new Set(calls.flatMap(function (r) { return r[C.flags] ? r[C.flags].split(" ") : []; }))).sort());

  let visible = calls;
  function applyFilters() {
    const f = {};
    Object.keys(controls).forEach(function (k) { f[k] = controls[k].value; });
    const needle = f.search.trim().toLowerCase();
    visible = calls.filter(function (r) {
      if (f.outcome && r[C.outcome] !== f.outcome) return false;
      if (f.layer && r[C.layer] !== f.layer) return false;
      if (f.method && r[C.method] !== f.method) return false;
      if (f.tool && r[C.tool] !== f.tool) return false;
      if (f.lane && String(r[C.lane]) !== f.lane) return false;
      if (f.flag && (" " + r[C.flags] + " ").indexOf(" " + f.flag + " ") < 0) return false;
      if (needle) {
        const client = r[C.client] === null ? null : data.clients[r[C.client]];
        const who = client ? [client.lineage, client.user_agent, client.client_info, client.session, client.address].join(" ") : "";
        const hay = [r[C.id], r[C.method], r[C.tool], r[C.rpc_id], r[C.outcome], r[C.flags], r[C.verdict], r[C.origin], who].join(" ").toLowerCase();
        if (hay.indexOf(needle) < 0) return false;
      }
      return true;
    });
    document.getElementById("count").textContent = visible.length + " of " + calls.length + " calls";
    renderRows(true);
    drawTimeline();
  }
  Object.keys(controls).forEach(function (k) {
    controls[k].addEventListener(k === "search" ? "input" : "change", applyFilters);
  });

  // ---- calls table (only the rows in view are in the DOM) ------------------------------
  const ROW = 24;
  const body = document.getElementById("table-body");
  const rowsBox = document.getElementById("table-rows");
  let selected = null;
  function renderRows(reset) {
    if (reset) body.scrollTop = 0;
    rowsBox.style.height = (visible.length * ROW) + "px";
    const first = Math.max(0, Math.floor(body.scrollTop / ROW) - 5);
    const last = Math.min(visible.length, first + Math.ceil(body.clientHeight / ROW) + 10);
    rowsBox.textContent = "";
    for (let i = first; i < last; i++) {
      const r = visible[i];
      const row = el("div", null, "row" + (r[C.id] === selected ? " selected" : ""));
      row.style.position = "absolute"; row.style.top = (i * ROW) + "px"; row.style.left = "0"; row.style.right = "0";
      row.dataset.callId = r[C.id];
      row.appendChild(el("span", r[C.id]));
      const pill = el("span", r[C.outcome], "pill"); pill.style.background = colorOf(r[C.outcome]);
      const cell = el("span"); cell.appendChild(pill); row.appendChild(cell);
      row.appendChild(el("span", r[C.method] || "(response)"));
      row.appendChild(el("span", r[C.rpc_id] === null ? "" : r[C.rpc_id]));
      row.appendChild(el("span", r[C.tool] || ""));
      row.appendChild(el("span", r[C.status] === null ? "—" : r[C.status]));
      row.appendChild(el("span", r[C.group] ? r[C.group] + "#" + r[C.attempt] : ""));
      row.appendChild(el("span", (r[C.flags] ? "[" + r[C.flags] + "] " : "") + r[C.verdict]));
      row.addEventListener("click", function () { select(r[C.id]); });
      rowsBox.appendChild(row);
    }
  }
  body.addEventListener("scroll", function () { renderRows(false); });

  // ---- details panel ----------------------------------------------------------------
  const details = document.getElementById("details");
  function kv(table, key, value) {
    const tr = el("tr"); tr.appendChild(el("td", key)); tr.appendChild(el("td", value)); table.appendChild(tr);
  }
  function select(id) {
    selected = id;
    renderRows(false);
    drawTimeline();
    const r = byId.get(id);
    details.textContent = "";
    details.dataset.callId = id;
    details.appendChild(el("h3", id + "  " + (r[C.method] || "(response)") + (r[C.tool] ? " " + r[C.tool] : "") + "  id=" + r[C.rpc_id]));
    const verdict = el("p");
    const pill = el("span", r[C.outcome], "pill"); pill.style.background = colorOf(r[C.outcome]);
    verdict.appendChild(pill);
    verdict.appendChild(el("span", "  " + r[C.layer] + " layer" + (r[C.flags] ? "  flags: " + r[C.flags] : "") +
      (r[C.status] !== null ? "  HTTP " + r[C.status] : "") + "  " + r[C.dur] + " ms"));
    details.appendChild(verdict);
    const client = r[C.client] === null ? null : data.clients[r[C.client]];
    if (client) {
      const who = el("table", null, "client");
      kv(who, "client", client.lineage + "  " + [client.client_info, client.user_agent].filter(Boolean).join(" · "));
      kv(who, "from", (client.address || "unknown address") + (client.session ? "  session " + client.session : "  no session"));
      kv(who, "lineage", client.joined);
      details.appendChild(who);
    }
    const d = data.details[id];
    details.appendChild(el("h4", "Evidence"));
    const ol = el("ol", null, "evidence");
    (d ? d.evidence : [r[C.verdict]]).forEach(function (line) { ol.appendChild(el("li", line)); });
    details.appendChild(ol);
    if (r[C.group]) {
      const g = groups.get(r[C.group]);
      details.appendChild(el("h4", "Retry chain " + g.retry_group));
      const t = el("table", null, "retry");
      kv(t, "origin", g.origin + " (" + g.confidence + " confidence)" + (g.failure_retry ? "" : ", not a failure retried"));
      kv(t, "attempts", g.members.join(" → ") + "  (this is attempt " + r[C.attempt] + ")");
      kv(t, "final outcome", g.final_outcome + " after " + g.total_ms + " ms");
      kv(t, "safety", g.safety + (g.may_have_run_twice ? "; the tool may have run twice" : ""));
      details.appendChild(t);
      const ev = el("ol"); g.evidence.forEach(function (line) { ev.appendChild(el("li", line)); }); details.appendChild(ev);
    }
    if (!d) {
      details.appendChild(el("p", "The bytes of this call are not in the report (it carries the first " +
        data.meta.detail_limit + " failing, flagged or retried calls); use mcp-blackbox export.", "muted"));
      return;
    }
    d.exchanges.forEach(function (x) {
      details.appendChild(el("h4", "Request  " + x.request.line + "  at +" + x.t + " ms"));
      const hq = el("table"); Object.keys(x.request.headers).forEach(function (k) { kv(hq, k, x.request.headers[k]); });
      details.appendChild(hq);
      if (x.request.body) details.appendChild(el("pre", x.request.body));
      if (x.response) {
        details.appendChild(el("h4", "Response  HTTP " + x.response.status));
        const hs = el("table"); Object.keys(x.response.headers).forEach(function (k) { kv(hs, k, x.response.headers[k]); });
        details.appendChild(hs);
        if (x.response.body) details.appendChild(el("pre", x.response.body));
      } else {
        details.appendChild(el("p", "No response: " + (x.error || "none recorded"), "muted"));
      }
      if (x.events) {
        details.appendChild(el("h4", "SSE events (" + x.events.length + ")" + (x.stream.ended ? "  stream ended: " + x.stream.ended : "")));
        x.events.forEach(function (e) {
          details.appendChild(el("div", "+" + e.t + " ms  " + e.event + (e.id !== null ? "  id " + e.id : ""), "muted"));
          if (e.data) details.appendChild(el("pre", e.data));
        });
      }
    });
  }

  // ---- timeline: one lane per session or connection, one bar per call ------------------
  const canvas = document.getElementById("timeline");
  const tip = document.getElementById("tip");
  const LANE = 16, TOP = 18, LEFT = 110;
  const span = Math.max(1, calls.reduce(function (m, r) { return Math.max(m, r[C.t0] + r[C.dur]); }, 0));
  // Tall enough for every lane up to 36 of them; beyond that, drag up and down.
  canvas.style.height = Math.min(TOP + 36 * LANE + 4, Math.max(120, TOP + data.lanes.length * LANE + 4)) + "px";
  let view = { from: -span * 0.01, to: span * 1.01, laneScroll: 0 };
  let bars = [];
  function drawTimeline() {
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth, height = canvas.clientHeight;
    canvas.width = width * ratio; canvas.height = height * ratio;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const scale = (width - LEFT - 10) / (view.to - view.from);
    const x = function (t) { return LEFT + (t - view.from) * scale; };
    ctx.font = "11px sans-serif"; ctx.fillStyle = "#667085";
    for (let i = 0; i <= 5; i++) {
      const t = view.from + (view.to - view.from) * i / 5;
      ctx.fillText((t / 1000).toFixed(2) + " s", x(t) - 12, 12);
    }
    const lanesShown = Math.floor((height - TOP) / LANE);
    for (let l = 0; l < lanesShown && l + view.laneScroll < data.lanes.length; l++) {
      ctx.fillStyle = l % 2 ? "#fcfcfd" : "#f5f6f8";
      ctx.fillRect(0, TOP + l * LANE, width, LANE);
      ctx.fillStyle = "#475467";
      ctx.fillText(data.lanes[l + view.laneScroll].label.slice(0, 16), 4, TOP + l * LANE + 12);
    }
    bars = [];
    const shownIds = new Set(visible.map(function (r) { return r[C.id]; }));
    const positions = new Map();
    calls.forEach(function (r) {
      const lane = r[C.lane] - view.laneScroll;
      if (lane < 0 || lane >= lanesShown) return;
      const x0 = x(r[C.t0]), x1 = Math.max(x0 + 2, x(r[C.t0] + r[C.dur]));
      if (x1 < LEFT || x0 > width) return;
      const y = TOP + lane * LANE + 3;
      ctx.globalAlpha = shownIds.has(r[C.id]) ? 1 : 0.15;
      ctx.fillStyle = colorOf(r[C.outcome]);
      ctx.fillRect(x0, y, x1 - x0, LANE - 6);
      if (r[C.id] === selected) { ctx.strokeStyle = "#101828"; ctx.lineWidth = 2; ctx.strokeRect(x0 - 1, y - 1, x1 - x0 + 2, LANE - 4); }
      const ticks = data.ticks[r[C.id]];
      if (ticks) {
        ctx.fillStyle = "#101828";
        ticks.forEach(function (t) { ctx.fillRect(x(t), y - 2, 1, LANE - 2); });
      }
      bars.push({ id: r[C.id], x0: x0, x1: x1, y: y, h: LANE - 6 });
      positions.set(r[C.id], { x: (x0 + x1) / 2, y: y + (LANE - 6) / 2 });
    });
    ctx.globalAlpha = 1;
    // retry chains: attempts linked by a line
    ctx.strokeStyle = "#101828"; ctx.lineWidth = 1; ctx.setLineDash([3, 3]);
    data.groups.forEach(function (g) {
      for (let i = 1; i < g.members.length; i++) {
        const a = positions.get(g.members[i - 1]), b = positions.get(g.members[i]);
        if (a && b) { ctx.beginPath(); ctx.moveTo(a.x, a.y); ctx.lineTo(b.x, b.y); ctx.stroke(); }
      }
    });
    ctx.setLineDash([]);
    canvas.dataset.bars = String(bars.length);
  }
  function barAt(event) {
    const rect = canvas.getBoundingClientRect();
    const px = event.clientX - rect.left, py = event.clientY - rect.top;
    for (let i = bars.length - 1; i >= 0; i--) {
      const b = bars[i];
      if (px >= b.x0 - 1 && px <= b.x1 + 1 && py >= b.y && py <= b.y + b.h) return b;
    }
    return null;
  }
  let drag = null;
  canvas.addEventListener("mousedown", function (e) { drag = { x: e.clientX, y: e.clientY, from: view.from, to: view.to, lane: view.laneScroll, moved: false }; });
  window.addEventListener("mouseup", function (e) {
    if (drag && !drag.moved) { const b = barAt(e); if (b) select(b.id); }
    drag = null;
  });
  canvas.addEventListener("mousemove", function (e) {
    if (drag) {
      const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
      const per = (drag.to - drag.from) / (canvas.clientWidth - LEFT - 10);
      view.from = drag.from - dx * per; view.to = drag.to - dx * per;
      view.laneScroll = Math.max(0, Math.min(Math.max(0, data.lanes.length - 1), drag.lane - Math.round(dy / LANE)));
      drawTimeline();
      return;
    }
    const b = barAt(e);
    if (!b) { tip.style.display = "none"; return; }
    const r = byId.get(b.id);
    tip.textContent = b.id + " " + (r[C.method] || "(response)") + (r[C.tool] ? " " + r[C.tool] : "") + ": " + r[C.outcome] +
      (r[C.flags] ? " [" + r[C.flags] + "]" : "") + " — " + r[C.verdict];
    tip.style.display = "block";
    tip.style.left = Math.min(e.offsetX + 12, canvas.clientWidth - 300) + "px";
    tip.style.top = (e.offsetY + 12) + "px";
  });
  canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  canvas.addEventListener("wheel", function (e) {
    e.preventDefault();
    const rect = canvas.getBoundingClientRect();
    const at = view.from + (e.clientX - rect.left - LEFT) / (canvas.clientWidth - LEFT - 10) * (view.to - view.from);
    const factor = e.deltaY > 0 ? 1.25 : 0.8;
    view.from = at - (at - view.from) * factor; view.to = at + (view.to - at) * factor;
    drawTimeline();
  }, { passive: false });
  document.getElementById("reset-zoom").addEventListener("click", function () {
    view = { from: -span * 0.01, to: span * 1.01, laneScroll: 0 }; drawTimeline();
  });
  window.addEventListener("resize", function () { drawTimeline(); renderRows(false); });

  const range = document.getElementById("time-range");
  const iso = function (seconds) { return new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 23); };
  range.textContent = iso(Number(range.dataset.start)) + " – " + iso(Number(range.dataset.end)) + " UTC";

  applyFilters();
  const firstFailure = calls.find(function (r) { return isFailure(r[C.outcome]); });
  if (firstFailure) select(firstFailure[C.id]);
  window.__reportReady = true;
})();
