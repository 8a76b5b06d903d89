// The report's own script. Captured content is untrusted: it only ever reaches the page
// through textContent, attribute values set by the DOM API, or the canvas; never as HTML.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const owns = function (object, key) { return Object.prototype.hasOwnProperty.call(object, key); };
  // Names, colours, descriptions and "is this a failure" come from the analyzer's vocabulary, never spelled here.
  const OUTCOMES = new Map(data.vocabulary.outcomes.map(function (o) { return [o.name, o]; }));
  const FLAGS = new Map(data.vocabulary.flags.map(function (f) { return [f.name, f]; }));
  const SAFETY = new Map(data.vocabulary.safety.map(function (s) { return [s.name, s]; }));
  const ENDINGS = new Map(data.vocabulary.endings.map(function (e) { return [e.name, e]; }));
  const ORIGINS = new Map(data.vocabulary.origins.map(function (o) { return [o.name, o]; }));
  // A header fact cut to one line shows its whole text on hover. Set here, by the DOM API: the page's
  // markup carries no captured text in an attribute.
  document.querySelectorAll(".fact").forEach(function (fact) { fact.title = fact.textContent; });

  // ---- the data, decoded (analyzer/review/report.py writes it compact) ------------------------------
  // Recurring texts are indices into data.strings; times are integer microseconds, a row's t0 the step from
  // the previous row's; groups name their attempts by row. Decoded here, once, into milliseconds and texts.
  const S = data.strings;
  const columnsOf = function (names) { const out = {}; names.forEach(function (name, i) { out[name] = i; }); return out; };
  const C = columnsOf(data.columns);
  C.layer = data.columns.length; C.attempt = data.columns.length + 1;  // derived below: not in the data
  const calls = data.calls;
  const N = calls.length;
  (function () {
    const text = data.string_columns.map(function (name) { return C[name]; });
    let t = 0;
    for (let i = 0; i < N; i++) {
      const r = calls[i];
      for (let k = 0; k < text.length; k++) r[text[k]] = S[r[text[k]]];
      t += r[C.t0];
      r[C.t0] = t / 1000; r[C.dur] = r[C.dur] / 1000;
      r[C.layer] = OUTCOMES.has(r[C.outcome]) ? OUTCOMES.get(r[C.outcome]).layer : null;
      r[C.attempt] = null;
    }
  })();
  const G = columnsOf(data.group_columns);
  data.groups = data.groups.map(function (g) {
    const members = g[G.members].map(function (i, n) { calls[i][C.attempt] = n + 1; return calls[i][C.id]; });
    return {
      retry_group: g[G.retry_group], origin: S[g[G.origin]], confidence: S[g[G.confidence]], members: members,
      attempts: members.length, failure_retry: Boolean(g[G.failure_retry]), total_ms: g[G.total_us] / 1000,
      final_outcome: S[g[G.final_outcome]], safety: S[g[G.safety]],
      evidence: g[G.evidence].map(function (i) { return S[i]; }),
    };
  });
  for (let i = 0; i < N; i++) { const g = calls[i][C.group]; if (g !== null) calls[i][C.group] = data.groups[g].retry_group; }
  const K = columnsOf(data.client_columns);
  data.clients = data.clients.map(function (c) {
    const out = {};
    Object.keys(K).forEach(function (name) { out[name] = S[c[K[name]]]; });
    return out;
  });
  const L = columnsOf(data.lane_columns), LG = columnsOf(data.lane_group_columns);
  data.lanes = data.lanes.map(function (l) { return { id: S[l[L.id]], label: l[L.label], group: l[L.group] }; });
  data.lane_groups = data.lane_groups.map(function (g) { return { source: g[LG.source], lineage: S[g[LG.lineage]] }; });
  const eventTicks = new Map();  // call id -> its SSE events' times (ms after the first call)
  data.ticks.forEach(function (tk) {
    const r = calls[tk[0]];
    eventTicks.set(r[C.id], tk.slice(1).map(function (us) { return r[C.t0] + us / 1000; }));
  });
  const stderrTicks = new Map();  // call id -> its stderr lines' times (a stdio server's log, ms after the first call)
  data.stderr_ticks.forEach(function (tk) {
    const r = calls[tk[0]];
    stderrTicks.set(r[C.id], tk.slice(1).map(function (us) { return r[C.t0] + us / 1000; }));
  });
  const T = columnsOf(data.anatomy_columns);
  const anatomyRows = new Map(data.anatomy.map(function (a) { return [calls[a[T.row]][C.id], a]; }));
  const ms = function (us) { return us === null ? null : us / 1000; };
  function anatomyOf(id) {  // the call's timeout anatomy (analyzer/calls/anatomy.py), or null
    const a = anatomyRows.get(id);
    if (!a) return null;
    return {
      reached_server_ms: ms(a[T.reached_server_us]), waited_ms: ms(a[T.waited_us]), ended_by: S[a[T.ended_by]],
      server_sent: { progress: a[T.progress], other_notifications: a[T.other_notifications], last_ms: ms(a[T.last_us]) },
      detail: S[a[T.detail]], sentence: S[a[T.sentence]],
    };
  }
  const indexOf = new Map(calls.map(function (row, i) { return [row[C.id], i]; }));
  const byId = function (id) { const i = indexOf.get(id); return i === undefined ? null : calls[i]; };
  // A huge capture's uneventful calls (success, no flag, no retry, no repeated run) come folded per lane and
  // time bucket: one aggregate each, drawn as a faint bar and listed as a summary row. Item k of the table's
  // order is a call when k >= 0, else the aggregate -k - 1.
  const aggs = data.aggregates || [];
  const NA = aggs.length;
  const A = columnsOf(data.aggregate_columns || []);
  const counted = function (flat) {  // [string index, count, ...] -> {name: count}, most common first
    const out = Object.create(null);  // a tool named "__proto__" is a key like any other
    for (let n = 0; n + 1 < flat.length; n += 2) out[S[flat[n]]] = flat[n + 1];
    return out;
  };
  aggs.forEach(function (a) { a[A.outcomes] = counted(a[A.outcomes]); a[A.methods] = counted(a[A.methods]); a[A.tools] = counted(a[A.tools]); });
  const order = (function () {
    const out = new Int32Array(N + NA);
    let i = 0, k = 0, n = 0;
    while (i < N || k < NA) {
      if (k >= NA || (i < N && calls[i][C.t0] <= aggs[k][A.t0])) out[n++] = i++; else out[n++] = -(k++) - 1;
    }
    return out;
  })();
  const groups = new Map(data.groups.map(function (g) { return [g.retry_group, g]; }));
  const colorOf = function (outcome) { return OUTCOMES.has(outcome) ? OUTCOMES.get(outcome).colour : "#667085"; };
  const isFailure = function (outcome) { return !OUTCOMES.has(outcome) || OUTCOMES.get(outcome).failure; };
  // meta.captures are the names every output gives (analyzer/wire/inputs.py capture_names), never paths.
  const captureName = function (i) { return String(data.meta.captures[i] || ""); };

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  // ---- times: wall clock in UTC (the same text on every machine), durations ----------------
  // Row times are milliseconds after the first call; meta.start is that call's epoch time in seconds.
  const START_MS = data.meta.start * 1000;
  const iso = function (t) { const d = new Date(START_MS + t); return isNaN(d.getTime()) ? "" : d.toISOString(); };
  const wall = function (t) { return iso(t).slice(11, 23); };  // 14:03:07.412
  const day = function (t) { return iso(t).slice(0, 10); };
  function duration(ms) {
    if (ms === null || ms === undefined || isNaN(ms)) return "?";
    if (ms < 10) return (Math.round(ms * 10) / 10) + " ms";
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (Math.round(ms / 100) / 10) + " s";
    const s = Math.round(ms / 1000);
    if (s < 3600) return Math.floor(s / 60) + " min" + (s % 60 ? " " + (s % 60) + " s" : "");
    return Math.floor(s / 3600) + " h" + (Math.floor(s / 60) % 60 ? " " + (Math.floor(s / 60) % 60) + " min" : "");
  }
  const offset = function (ms) { return "+" + (Math.round(ms * 1000) / 1000) + " ms"; };

  // ---- who is in which card's set -----------------------------------------------------------
  const chainOf = function (r) { return r[C.group] ? groups.get(r[C.group]) : null; };
  // "Ran more than once" (analyzer/across/repeated_runs.py): the one answer to "did it run twice?". Every attempt of
  // every entry is in ran_more_than_once_calls with its entry's certainty; the list of entries is cut at 20.
  const twiceOf = data.meta.ran_more_than_once_calls || {};
  const certaintyOf = function (id) { return owns(twiceOf, id) ? twiceOf[id] : null; };
  const entriesOf = new Map();  // call id -> the listed entries that hold it
  (data.meta.ran_more_than_once || []).forEach(function (entry) {
    entry.attempts.forEach(function (a) { if (!entriesOf.has(a.call_id)) entriesOf.set(a.call_id, []); entriesOf.get(a.call_id).push(entry); });
  });
  // The flags the page shows on their own: not those that feed "ran more than once" (the export keeps them).
  const flagShown = function (name) { return !FLAGS.has(name) || FLAGS.get(name).shown !== false; };
  const shownFlags = function (r) { return r[C.flags] ? r[C.flags].split(" ").filter(flagShown).join(" ") : ""; };
  const findings = data.meta.findings || [];
  const findingCalls = findings.map(function (f) { return new Set(f.calls); });
  const topErrors = data.meta.top_errors || [];
  const SETS = {
    chained: function (r) { return Boolean(r[C.group]); },
    "ran-twice": function (r) { return certaintyOf(r[C.id]) !== null; },
    "ran-twice-certain": function (r) { return certaintyOf(r[C.id]) === "certain"; },
    "ran-twice-possible": function (r) { return certaintyOf(r[C.id]) === "possible"; },
  };
  findingCalls.forEach(function (ids, k) { SETS["finding-" + (k + 1)] = function (r) { return ids.has(r[C.id]); }; });
  topErrors.forEach(function (_, k) { SETS["error-" + (k + 1)] = function (r) { return r[C.error] === k; }; });

  // ---- filters -----------------------------------------------------------------------------
  const controls = {
    outcome: document.getElementById("f-outcome"), layer: document.getElementById("f-layer"),
    method: document.getElementById("f-method"), tool: document.getElementById("f-tool"),
    session: document.getElementById("f-lane"), flag: document.getElementById("f-flag"),
    set: document.getElementById("f-set"), q: document.getElementById("search"),
  };
  function fill(select, values, label) {
    values.forEach(function (value) {
      const option = el("option", label ? label(value) : value);
      option.value = String(value);
      select.appendChild(option);
    });
  }
  const distinct = function (col) {
    const seen = new Set();
    for (let i = 0; i < N; i++) { const v = calls[i][C[col]]; if (v !== null && v !== "") seen.add(v); }
    const key = { outcome: "outcomes", method: "methods", tool: "tools" }[col];
    if (key) aggs.forEach(function (a) { Object.keys(a[A[key]]).forEach(function (v) { if (v !== "(response)") seen.add(v); }); });
    return Array.from(seen).sort();
  };
  fill(controls.outcome, distinct("outcome"));
  fill(controls.layer, distinct("layer"));
  fill(controls.method, distinct("method"));
  fill(controls.tool, distinct("tool"));
  fill(controls.session, data.lanes.map(function (_, i) { return i; }), function (i) { return data.lanes[i].label; });
  fill(controls.flag, Object.keys(data.meta.flags).filter(flagShown).sort());
  (function () {  // the set filter's findings and top errors, each named by its own text (textContent)
    const add = function (label, items, text) {
      if (!items.length) return;
      const group = el("optgroup"); group.label = label;
      items.forEach(function (item, k) { const o = el("option", text(item, k)); o.value = (label === "findings" ? "finding-" : "error-") + (k + 1); group.appendChild(o); });
      controls.set.appendChild(group);
    };
    add("findings", findings, function (f) { return f.title; });
    add("top errors", topErrors, function (e) { return e.count + " × " + e.outcome + ": " + e.error; });
  })();

  // Search: a lower-cased haystack per call, built the first time a search needs it.
  const hay = new Array(N);
  function haystack(i) {
    if (hay[i] !== undefined) return hay[i];
    const r = calls[i];
    const client = r[C.client] === null ? null : data.clients[r[C.client]];
    const lane = data.lanes[r[C.lane]];
    const parts = [r[C.id], r[C.method], r[C.tool], r[C.rpc_id], r[C.outcome], r[C.layer], r[C.flags], r[C.verdict],
      r[C.origin], r[C.error_code], r[C.status] === null ? "" : "http " + r[C.status], captureName(r[C.source]),
      lane ? lane.id + " " + lane.label : ""];
    if (client) parts.push(client.lineage, client.user_agent, client.client_info, client.session, client.address, client.unit, client.process);
    const d = data.details[r[C.id]];
    if (d) {
      parts.push(d.evidence.join("\n"));
      d.exchanges.forEach(function (x) {
        parts.push(x.flow, x.request.line, x.request.body, x.error);
        Object.keys(x.request.headers).forEach(function (k) { parts.push(k + ": " + x.request.headers[k]); });
        if (x.response) {
          parts.push(x.response.body);
          Object.keys(x.response.headers).forEach(function (k) { parts.push(k + ": " + x.response.headers[k]); });
        }
        (x.events || []).forEach(function (e) { parts.push(e.data); });
      });
      (d.stderr || []).forEach(function (line) { parts.push(line.text); });
    }
    const a = anatomyOf(r[C.id]);
    if (a) parts.push(a.sentence, a.ended_by);
    hay[i] = parts.filter(function (p) { return p !== null && p !== undefined && p !== ""; }).join("\n").toLowerCase();
    return hay[i];
  }

  let visible = [];  // items of the table's order: calls (>= 0) and aggregates (< 0)
  const shown = new Uint8Array(N);
  const aggShown = new Uint8Array(NA);
  let selected = null;
  let selectedAgg = null;  // the aggregate whose summary the details panel shows, when no call is selected
  // An aggregate holds only uneventful calls: no flag, chain or repeated run, and nothing of theirs to search
  // but their lane. It matches a filter on outcome, layer, method or tool when one of its calls does.
  function aggMatches(a, f, needle) {
    if (f.flag || f.set) return false;
    if (f.outcome && !owns(a[A.outcomes], f.outcome)) return false;
    if (f.layer && !Object.keys(a[A.outcomes]).some(function (o) { return OUTCOMES.has(o) && OUTCOMES.get(o).layer === f.layer; })) return false;
    if (f.method && !owns(a[A.methods], f.method)) return false;
    if (f.tool && !owns(a[A.tools], f.tool)) return false;
    if (f.session && String(a[A.lane]) !== f.session) return false;
    if (needle) { const lane = data.lanes[a[A.lane]]; return (lane.id + " " + lane.label).toLowerCase().indexOf(needle) >= 0; }
    return true;
  }
  const firstCall = function () { const n = visible.find(function (i) { return i >= 0; }); return n === undefined ? null : n; };
  // The filters as the controls set them, with the search's needle, a flow id's call prefix and the card's set.
  function currentFilters() {
    const f = {};
    Object.keys(controls).forEach(function (k) { f[k] = controls[k].value; });
    const needle = f.q.trim().toLowerCase();
    // A flow id (a UUID) names its calls: c + its first 12 hex digits.
    const compact = needle.replace(/-/g, "");
    const flowPrefix = /^[0-9a-f]{12,}$/.test(compact) && needle.indexOf("-") >= 0 ? "c" + compact.slice(0, 12) : null;
    return { f: f, needle: needle, flowPrefix: flowPrefix, inSet: f.set ? SETS[f.set] : null };
  }
  function callMatches(i, filters) {
    const r = calls[i], f = filters.f, inSet = filters.inSet;
    const ok = !(f.outcome && r[C.outcome] !== f.outcome) && !(f.layer && r[C.layer] !== f.layer) &&
      !(f.method && r[C.method] !== f.method) && !(f.tool && r[C.tool] !== f.tool) &&
      !(f.session && String(r[C.lane]) !== f.session) &&
      !(f.flag && (" " + r[C.flags] + " ").indexOf(" " + f.flag + " ") < 0) && !(inSet && !inSet(r));
    if (!ok || !filters.needle) return ok;
    return haystack(i).indexOf(filters.needle) >= 0 || (filters.flowPrefix !== null && r[C.id].indexOf(filters.flowPrefix) === 0);
  }
  // The table follows the timeline's zoom: zoomed in, it lists only the calls (and aggregates) the view reaches.
  let appliedZoom = "";
  const zoomKey = function () { return zoomed() ? view.from + "~" + view.to : ""; };
  function applyFilters() {
    const filters = currentFilters();
    appliedZoom = zoomKey();
    const from = view.from, to = view.to, zoom = appliedZoom !== "";
    visible = [];
    let callsShown = 0, aggRows = 0, aggCalls = 0;
    for (let n = 0; n < order.length; n++) {
      const i = order[n];
      if (i < 0) {
        const k = -i - 1, a = aggs[k];
        const on = aggMatches(a, filters.f, filters.needle) && !(zoom && (dE[N + k] < from || dS[N + k] > to));
        aggShown[k] = on ? 1 : 0;
        if (on) { visible.push(i); aggRows++; aggCalls += a[A.count]; }
        continue;
      }
      const ok = callMatches(i, filters) && !(zoom && (dE[i] < from || dS[i] > to));
      shown[i] = ok ? 1 : 0;
      if (ok) { visible.push(i); callsShown++; }
    }
    sortVisible();
    const where = zoom ? " in the zoomed range" : "";
    document.getElementById("count").textContent = NA || data.meta.aggregated
      ? callsShown + " of " + N + " eventful calls, " + aggCalls + " of " + data.meta.aggregated + " uneventful calls in " + aggRows + " summary rows" + where
      : callsShown + " of " + N + " calls" + where;
    markCards();
    markStory();
    renderRows(true);
    if (restoring) return;  // restore() picks the call and draws once
    followFilters();
    drawTimeline();
    writeHash();
  }
  // A moved or zoomed view: the table follows it (applyFilters draws and writes the address), else only those.
  function viewCommitted() {
    if (zoomKey() !== appliedZoom) applyFilters(); else { drawTimeline(); writeHash(); }
  }

  // ---- sorting: a click on a column's header sorts by it, a second click reverses ---------------------
  let sortKey = null, sortDir = 1;  // null: the order the calls started (with the aggregates in place)
  const SORT_KEYS = ["id", "t0", "dur", "outcome", "method", "tool", "status", "group", "verdict"];
  function sortValue(item) {  // a number or a text; null sorts last either way
    if (item < 0) {
      const a = aggs[-item - 1];
      return sortKey === "t0" ? a[A.t0] : sortKey === "dur" ? a[A.dur_p50] : null;
    }
    const r = calls[item];
    switch (sortKey) {
      case "method": return r[C.method] || "(response)";
      case "group": return r[C.group] ? r[C.group] + "#" + r[C.attempt] : null;
      case "verdict": return verdictText(r);
      default: { const v = r[C[sortKey]]; return v === undefined ? null : v; }
    }
  }
  function sortVisible() {
    if (sortKey === null) return;
    const keys = new Map();
    visible.forEach(function (item) { keys.set(item, sortValue(item)); });
    const rank = new Map(visible.map(function (item, n) { return [item, n]; }));
    visible.sort(function (x, y) {
      const a = keys.get(x), b = keys.get(y);
      if (a === null || b === null) return a === b ? rank.get(x) - rank.get(y) : a === null ? 1 : -1;
      const c = typeof a === "number" && typeof b === "number" ? a - b
        : String(a).localeCompare(String(b), "en", { numeric: true });
      return c ? c * sortDir : rank.get(x) - rank.get(y);
    });
  }
  function markSort() {
    document.querySelectorAll("#table-head [role=columnheader]").forEach(function (head) {
      const key = head.querySelector(".sort").dataset.sort;
      head.setAttribute("aria-sort", key !== sortKey ? "none" : sortDir > 0 ? "ascending" : "descending");
    });
  }
  function setSort(text) {  // "dur" ascending, "-dur" descending, "" the start order
    const key = text.replace(/^-/, "");
    if (SORT_KEYS.indexOf(key) < 0) { sortKey = null; sortDir = 1; } else { sortKey = key; sortDir = text[0] === "-" ? -1 : 1; }
    markSort();
  }
  const sortText = function () { return sortKey === null ? "" : (sortDir < 0 ? "-" : "") + sortKey; };
  document.getElementById("table-head").addEventListener("click", function (e) {
    const button = e.target.closest ? e.target.closest(".sort") : null;
    if (!button) return;
    const key = button.dataset.sort;
    if (sortKey === key) sortDir = -sortDir; else { sortKey = key; sortDir = 1; }
    markSort();
    applyFilters();
    if (selected !== null) { scrollRowIntoView(selected); renderRows(false); }
  });

  // The details follow the filter: never a call the filter hides. A zoom that leaves the selected call out of
  // view keeps it open (zooming around loses nothing; Enter zooms back to it).
  function followFilters() {
    const at = selected === null ? undefined : indexOf.get(selected);
    if (at !== undefined && (shown[at] || callMatches(at, currentFilters()))) return;
    const first = firstCall();
    if (first !== null) select(calls[first][C.id], { quiet: true });
    else showNothing();
  }
  Object.keys(controls).forEach(function (k) {
    controls[k].addEventListener(k === "q" ? "input" : "change", applyFilters);
  });

  // ---- summary cards: each one is a filter ---------------------------------------------------
  const cardBox = document.getElementById("outcome-cards");
  Object.keys(data.meta.outcomes).forEach(function (name) {
    const card = el("button", null, "card" + (isFailure(name) ? " bad" : ""));
    card.type = "button";
    card.dataset.outcome = name;
    card.title = (OUTCOMES.has(name) ? OUTCOMES.get(name).description + " " : "") + "Click to show only these calls.";
    card.appendChild(el("span", data.meta.outcomes[name], "n"));
    card.appendChild(document.createTextNode(name));
    cardBox.appendChild(card);
  });
  const flagBox = document.getElementById("flag-cards");
  Object.keys(data.meta.flags).filter(flagShown).forEach(function (name) {
    const card = el("button", null, "card");
    card.type = "button";
    card.dataset.flag = name;
    const description = FLAGS.has(name) ? FLAGS.get(name).description : "";
    card.title = description + " Click to show only these calls.";
    card.appendChild(el("span", data.meta.flags[name], "n"));
    card.appendChild(document.createTextNode(name));
    flagBox.appendChild(card);
  });
  function toggle(control, value) {
    control.value = control.value === value ? "" : value;
    applyFilters();
  }
  document.getElementById("cards").parentNode.addEventListener("click", function (e) {
    const card = e.target.closest ? e.target.closest(".card") : null;
    if (!card) return;
    if (card.dataset.outcome !== undefined) toggle(controls.outcome, card.dataset.outcome);
    else if (card.dataset.flag !== undefined) toggle(controls.flag, card.dataset.flag);
    else if (card.dataset.set) toggle(controls.set, card.dataset.set);
    else if (card.dataset.set === "") {  // "calls": every card filter off
      controls.outcome.value = ""; controls.flag.value = ""; controls.set.value = ""; applyFilters();
    }
  });
  function markCards() {
    document.querySelectorAll(".card").forEach(function (card) {
      const on = card.dataset.outcome !== undefined ? controls.outcome.value === card.dataset.outcome
        : card.dataset.flag !== undefined ? controls.flag.value === card.dataset.flag
          : card.dataset.set ? controls.set.value === card.dataset.set
            : card.dataset.set === "" && !controls.outcome.value && !controls.flag.value && !controls.set.value;
      card.classList.toggle("active", on);
      card.setAttribute("aria-pressed", on ? "true" : "false");
    });
  }

  // ---- the story: findings, the writes that ran more than once, the top errors -------------------------
  // Each finding opens with its title and summary; its evidence unfolds; its button shows its calls in the table
  // and zooms the timeline to its start and end. Their text quotes servers: textContent only.
  const findingBox = document.getElementById("findings");
  const storyMore = document.getElementById("story-more");
  const atEpoch = function (seconds) { return seconds * 1000 - START_MS; };  // ms after the first call
  function showFinding(k) {
    const f = findings[k], value = "finding-" + (k + 1);
    if (controls.set.value === value) { controls.set.value = ""; fullView(); applyFilters(); return; }
    controls.set.value = value;
    const a = toDisplay(atEpoch(f.start)), b = toDisplay(atEpoch(f.end));
    const pad = Math.max((b - a) * 0.05, 5);
    view.from = a - pad; view.to = b + pad; view.rowScroll = 0;
    applyFilters();
  }
  if (!findings.length) storyMore.insertBefore(el("span", "No cross-call pattern found.", "no-findings"), storyMore.firstChild);
  findings.forEach(function (f, k) {
    const box = el("details", null, "finding");
    box.dataset.finding = String(k + 1);
    const summary = el("summary");
    summary.appendChild(el("span", f.title, "title"));
    summary.appendChild(document.createTextNode(" — "));
    summary.appendChild(el("span", f.summary, "summary"));
    summary.appendChild(el("span", wall(atEpoch(f.start)) + " – " + wall(atEpoch(f.end)) + " UTC", "when"));
    const show = el("button", "show its " + f.calls.length + " call" + (f.calls.length === 1 ? "" : "s"), "show");
    show.type = "button";
    show.dataset.set = "finding-" + (k + 1);
    show.title = "Show only these calls in the table, and zoom the timeline to " + wall(atEpoch(f.start)) + " – " + wall(atEpoch(f.end)) + " UTC";
    show.addEventListener("click", function (e) { e.preventDefault(); showFinding(k); });
    summary.appendChild(show);
    box.appendChild(summary);
    const evidence = el("ul", null, "evidence");
    f.evidence.forEach(function (line) { evidence.appendChild(el("li", line)); });
    box.appendChild(evidence);
    findingBox.appendChild(box);
  });
  (function () {  // ran more than once: one list, each entry with its attempts
    const box = document.getElementById("ran-twice"), list = document.getElementById("ran-twice-list");
    const counts = data.meta.ran_more_than_once_counts || {}, entries = data.meta.ran_more_than_once || [];
    const total = (counts.certain || 0) + (counts.possible || 0);
    if (!total) { box.hidden = true; return; }
    const summary = box.querySelector("summary");
    summary.appendChild(el("b", "Ran more than once: "));
    summary.appendChild(document.createTextNode((counts.certain || 0) + " certain, " + (counts.possible || 0) + " possible"));
    if (entries.length < total) summary.appendChild(el("span", "(the first " + entries.length + " listed)", "muted"));
    entries.forEach(function (entry) {
      const li = el("li");
      li.appendChild(el("span", entry.tool + " (arguments " + entry.arguments_digest.slice(0, 10) + ", client " + entry.lineage + "): " +
        entry.certainty + ", " + entry.runs + " runs in " + entry.attempts.length + " attempts"));
      li.appendChild(attemptList(entry, null, null, "attempt-list"));
      list.appendChild(li);
    });
  })();
  (function () {  // the top errors: the reasons with the figures that differ set aside (review/top_errors.py)
    const box = document.getElementById("top-errors"), body = box.querySelector("tbody");
    if (!topErrors.length) { box.hidden = true; return; }
    const summary = box.querySelector("summary");
    summary.appendChild(el("b", "Top errors: "));
    const top = topErrors[0];
    summary.appendChild(document.createTextNode(top.count + " × " + top.outcome + ": " + top.error));
    if (topErrors.length > 1) summary.appendChild(el("span", "and " + (topErrors.length - 1) + " more", "muted"));
    topErrors.forEach(function (e, k) {
      const tr = el("tr");
      tr.dataset.set = "error-" + (k + 1);
      tr.title = "Click to show only these calls";
      tr.appendChild(el("td", e.count));
      const pill = el("span", e.outcome, "pill"); pill.style.background = colorOf(e.outcome);
      el("td").appendChild(pill);
      tr.appendChild(pill.parentNode);
      tr.appendChild(el("td", e.error));
      const first = el("button", e.first, "link mono"); first.type = "button";
      first.addEventListener("click", function (ev) { ev.stopPropagation(); reveal(e.first); });
      el("td").appendChild(first);
      tr.appendChild(first.parentNode);
      tr.addEventListener("click", function () { toggle(controls.set, tr.dataset.set); });
      body.appendChild(tr);
    });
  })();
  function markStory() {
    document.querySelectorAll("#story [data-set]").forEach(function (node) {
      const on = controls.set.value === node.dataset.set;
      node.classList.toggle("active", on);
      if (node.tagName === "BUTTON") node.setAttribute("aria-pressed", on ? "true" : "false");
    });
  }

  // ---- calls table (only the rows in view are in the DOM) -------------------------------------
  const ROW = 24;
  const body = document.getElementById("table-body");
  const rowsBox = document.getElementById("table-rows");
  function cell(row, text, cls, title) {
    const span = el("span", text, cls);
    if (title !== undefined) span.title = title;  // the full text of a cell that may be cut
    row.appendChild(span);
    return span;
  }
  function renderRows(reset) {
    if (reset) body.scrollTop = 0;
    rowsBox.style.height = (visible.length * ROW) + "px";
    const first = Math.max(0, Math.floor(body.scrollTop / ROW) - 5);
    const last = Math.min(visible.length, first + Math.ceil(body.clientHeight / ROW) + 10);
    rowsBox.textContent = "";
    for (let n = first; n < last; n++) {
      if (visible[n] < 0) { rowsBox.appendChild(aggregateRow(-visible[n] - 1, n)); continue; }
      const r = calls[visible[n]];
      const id = r[C.id];
      const row = el("div", null, "row" + (id === selected ? " selected" : ""));
      row.style.position = "absolute"; row.style.top = (n * ROW) + "px"; row.style.left = "0"; row.style.right = "0";
      row.dataset.callId = id;
      cell(row, id, "mono", id);
      cell(row, wall(r[C.t0]), "mono", day(r[C.t0]) + " " + wall(r[C.t0]) + " UTC, " + offset(r[C.t0]) + " after the first call");
      cell(row, duration(r[C.dur]), "num", r[C.dur] + " ms");
      const pill = el("span", r[C.outcome], "pill"); pill.style.background = colorOf(r[C.outcome]); pill.title = r[C.outcome];
      cell(row).appendChild(pill);
      const method = r[C.method] || "(response)";
      cell(row, method, null, method);
      cell(row, r[C.tool] || "", null, r[C.tool] || "");
      cell(row, r[C.status] === null ? "—" : r[C.status]);
      cell(row, r[C.group] ? r[C.group] + "#" + r[C.attempt] : "");
      const verdict = verdictText(r);
      const said = cell(row, null, null, verdict);
      const certainty = certaintyOf(id);
      if (certainty !== null) said.appendChild(twicePill(certainty));
      said.appendChild(document.createTextNode(verdict));
      row.addEventListener("click", function () { select(id); });
      rowsBox.appendChild(row);
    }
  }
  // A call's flags (those shown on their own) and verdict, as the table and the search read them.
  function verdictText(r) { const flags = shownFlags(r); return (flags ? "[" + flags + "] " : "") + r[C.verdict]; }
  function twicePill(certainty) {
    const pill = el("span", "ran more than once · " + certainty, "pill twice");
    const c = (data.vocabulary.certainties || []).find(function (x) { return x.name === certainty; });
    pill.title = c ? c.description : "";
    return pill;
  }
  const mix = function (counts, limit) {
    const keys = Object.keys(counts);
    return keys.slice(0, limit || keys.length).map(function (k) { return k + " ×" + counts[k]; }).join(", ") +
      (limit && keys.length > limit ? ", …" : "");
  };
  const aggregateSummary = function (a) {
    return a[A.count] + " uneventful call" + (a[A.count] === 1 ? "" : "s") + ": " + mix(a[A.outcomes]) + "; duration p50 " +
      duration(a[A.dur_p50]) + ", p95 " + duration(a[A.dur_p95]) + ", max " + duration(a[A.dur_max]);
  };
  function aggregateRow(k, n) {
    const a = aggs[k];
    const row = el("div", null, "row aggregate" + (k === selectedAgg && selected === null ? " selected" : ""));
    row.style.position = "absolute"; row.style.top = (n * ROW) + "px"; row.style.left = "0"; row.style.right = "0";
    row.dataset.aggregate = String(k);
    cell(row, "Σ " + a[A.count] + " calls", "mono", a[A.count] + " uneventful calls of " + data.lanes[a[A.lane]].label);
    cell(row, wall(a[A.t0]), "mono", day(a[A.t0]) + " " + wall(a[A.t0]) + " – " + wall(a[A.t1]) + " UTC");
    cell(row, duration(a[A.dur_p50]), "num", "median duration; max " + duration(a[A.dur_max]));
    const pill = el("span", "uneventful", "pill"); pill.style.background = "#98a2b3"; pill.title = mix(a[A.outcomes]);
    cell(row).appendChild(pill);
    cell(row, mix(a[A.methods], 2), null, mix(a[A.methods]));
    cell(row, mix(a[A.tools], 2), null, mix(a[A.tools]));
    cell(row, "—");
    cell(row, "");
    const summary = aggregateSummary(a);
    cell(row, summary, null, summary);
    row.addEventListener("click", function () { showAggregate(k); });
    return row;
  }
  body.addEventListener("scroll", function () { renderRows(false); });
  function scrollRowIntoView(id) { scrollItemIntoView(indexOf.get(id)); }
  function scrollItemIntoView(item) {
    const n = visible.indexOf(item);
    if (n < 0) return;
    const top = n * ROW;
    if (top < body.scrollTop) body.scrollTop = top;
    else if (top + ROW > body.scrollTop + body.clientHeight) body.scrollTop = top + ROW - body.clientHeight;
  }

  // ---- details panel ----------------------------------------------------------------------
  const details = document.getElementById("details");
  function kv(table, key, value) {
    const tr = el("tr"); tr.appendChild(el("td", key)); tr.appendChild(el("td", value)); table.appendChild(tr);
  }
  function showNothing() {
    selected = null; selectedAgg = null;
    details.textContent = "";
    delete details.dataset.callId;
    delete details.dataset.aggregate;
    details.appendChild(el("p", "No call matches the filters.", "muted nothing"));
  }
  function who(r) {
    const client = r[C.client] === null ? null : data.clients[r[C.client]];
    if (!client) return "no client identity";
    return [client.lineage, client.client_info || client.user_agent, client.session ? "session " + client.session.slice(0, 8)
      : client.address].filter(Boolean).join(" · ");
  }
  // A retry chain or a repeated execution: its attempts in order, coloured by outcome, each one a link.
  function attempts(ids, current, label) {
    const box = el("div", null, "attempts");
    const first = byId(ids[0]);
    ids.forEach(function (id, n) {
      const r = byId(id);
      if (!r) return;
      if (n) box.appendChild(el("span", "→", "arrow"));
      const b = el("button", null, "attempt" + (id === current ? " current" : ""));
      b.type = "button";
      b.dataset.callId = id;
      b.style.borderLeftColor = colorOf(r[C.outcome]);
      b.appendChild(el("b", "#" + (n + 1) + " " + r[C.outcome]));
      b.appendChild(el("span", (n ? "+" + duration(r[C.t0] - first[C.t0]) + " · " : "") + wall(r[C.t0]) + " UTC"));
      b.appendChild(el("span", who(r)));
      const extra = label ? label(r, n) : (r[C.origin] ? r[C.origin] + (r[C.confidence] ? " (" + r[C.confidence] + ")" : "") : "first attempt");
      b.appendChild(el("span", extra));
      b.title = id + ": " + (r[C.method] || "") + " " + (r[C.tool] || "") + " — " + r[C.verdict] +
        (r[C.origin] && ORIGINS.has(r[C.origin]) ? "\n" + r[C.origin] + ": " + ORIGINS.get(r[C.origin]).description : "");
      b.addEventListener("click", function () { reveal(id); });
      box.appendChild(b);
    });
    return box;
  }
  function renderDetails(id) {
    const r = byId(id);
    details.textContent = "";
    details.dataset.callId = id;
    detailsHeading(r);
    const client = r[C.client] === null ? null : data.clients[r[C.client]];
    if (client) details.appendChild(clientTable(client));
    const d = data.details[id];
    details.appendChild(el("h4", "Evidence"));
    const ol = el("ol", null, "evidence");
    (d ? d.evidence : [r[C.verdict]]).forEach(function (line) { ol.appendChild(el("li", line)); });
    details.appendChild(ol);
    const a = anatomyOf(id);
    if (a) detailsAnatomy(a, r[C.carrier] === "stdio");
    if (r[C.group]) detailsChain(r);
    (entriesOf.get(id) || []).forEach(function (entry) { detailsRanTwice(entry, r); });
    if (d && d.stderr && d.stderr.length) detailsStderr(d.stderr, r);
    if (!d) {
      details.appendChild(el("p", "The bytes of this call are not in the report (it carries the first " +
        data.meta.detail_limit + " failing, flagged or retried calls); use mcp-blackbox export.", "muted"));
      return;
    }
    d.exchanges.forEach(function (x) {
      if (x.stdio) detailsStdioLine(x);
      else detailsExchange(x);
    });
  }
  // A write that ran more than once, in the details of one of its attempts: every attempt, how it ended, whether
  // it ran, and the retry chain that holds it; the attempts of this call's own chain are marked.
  function detailsRanTwice(entry, r) {
    details.appendChild(el("h4", "Ran more than once (" + entry.certainty + "): " + entry.tool + ", " + entry.runs +
      " runs in " + entry.attempts.length + " attempts, arguments " + entry.arguments_digest.slice(0, 10) + ", client " + entry.lineage));
    const c = (data.vocabulary.certainties || []).find(function (x) { return x.name === entry.certainty; });
    if (c) details.appendChild(el("p", c.description, "muted"));
    details.appendChild(attemptList(entry, r[C.group], r[C.id], "twice-attempts"));
  }
  // An entry's attempts as a list: each a link to its call, with how it ended, whether it ran, and its retry chain.
  function attemptList(entry, chain, current, cls) {
    const ol = el("ol", null, cls);
    entry.attempts.forEach(function (a) {
      const li = el("li");
      if (chain && a.retry_group === chain) { li.className = "this-chain"; li.title = "in this call's retry chain"; }
      const link = el("button", a.call_id + (a.call_id === current ? " (this call)" : ""), "attempt-link mono");
      link.type = "button"; link.dataset.callId = a.call_id;
      link.addEventListener("click", function () { reveal(a.call_id); });
      li.appendChild(link);
      li.appendChild(document.createTextNode(" " + (a.outcome || "no verdict") + (a.http_status !== null && a.http_status !== undefined ? " (HTTP " + a.http_status + ")" : "") +
        ": " + a.ran + (a.retry_group ? "; retry chain " + a.retry_group + (chain && a.retry_group === chain ? " (this call's)" : "") : "; not in a retry chain")));
      ol.appendChild(li);
    });
    return ol;
  }
  // The call's id, method and tool; when and for how long; its outcome, layer, flags and status.
  function detailsHeading(r) {
    details.appendChild(el("h3", r[C.id] + "  " + (r[C.method] || "(response)") + (r[C.tool] ? " " + r[C.tool] : "") +
      (r[C.rpc_id] !== null && r[C.rpc_id] !== undefined ? "  id=" + r[C.rpc_id] : "")));
    details.appendChild(el("p", day(r[C.t0]) + " " + wall(r[C.t0]) + " UTC  (" + offset(r[C.t0]) + " after the first call), took " +
      duration(r[C.dur]) + "  ·  " + captureName(r[C.source]), "when"));
    const verdict = el("p");
    const pill = el("span", r[C.outcome], "pill"); pill.style.background = colorOf(r[C.outcome]);
    verdict.appendChild(pill);
    const certainty = certaintyOf(r[C.id]);
    if (certainty !== null) { verdict.appendChild(document.createTextNode(" ")); verdict.appendChild(twicePill(certainty)); }
    const flags = shownFlags(r);
    verdict.appendChild(el("span", "  " + (r[C.layer] || "no") + " layer" + (flags ? "  flags: " + flags : "") +
      (r[C.status] !== null ? "  HTTP " + r[C.status] : "") + (r[C.carrier] === "stdio" ? "  stdio" : "") + "  " + r[C.dur] + " ms"));
    details.appendChild(verdict);
  }
  function clientTable(client) {
    const t = el("table", null, "client");
    kv(t, "client", client.lineage + "  " + [client.client_info, client.user_agent].filter(Boolean).join(" · "));
    kv(t, "from", (client.address || "unknown address") + (client.session ? "  session " + client.session : "  no session"));
    kv(t, "process", client.process || "not recorded (a remote client, a gateway, or a capture without it)");
    kv(t, "lineage", client.joined);
    return t;
  }
  function detailsAnatomy(a, stdio) {
    details.appendChild(el("h4", "Timeout anatomy: no answer came"));
    const section = el("div", null, "anatomy");
    section.appendChild(el("p", a.sentence, "sentence"));
    const t = el("table");
    kv(t, "reached the server", stdio ? "written to the server's stdin (no headers on stdio)" :
      a.reached_server_ms === null ? "no response headers came back" : "response headers after " + duration(a.reached_server_ms));
    const sent = a.server_sent;
    kv(t, "server sent", sent.progress + " progress, " + sent.other_notifications + " other notification(s)" +
      (sent.last_ms !== null ? ", the last after " + duration(sent.last_ms) : ""));
    kv(t, "ended by", a.ended_by + (ENDINGS.has(a.ended_by) ? ": " + ENDINGS.get(a.ended_by).description : ""));
    if (a.detail) kv(t, "detail", a.detail);
    kv(t, "client waited", a.waited_ms === null ? "not known" : duration(a.waited_ms));
    section.appendChild(t);
    details.appendChild(section);
  }
  function detailsChain(r) {
    const g = groups.get(r[C.group]);
    details.appendChild(el("h4", "Retry chain " + g.retry_group + " (" + g.members.length + " attempts, this is #" + r[C.attempt] + ")"));
    details.appendChild(attempts(g.members, r[C.id]));
    const t = el("table", null, "retry");
    kv(t, "origin", g.origin + " (" + g.confidence + " confidence)" + (g.failure_retry ? "" : ", not a failure retried") +
      (ORIGINS.has(g.origin) ? ": " + ORIGINS.get(g.origin).description : ""));
    kv(t, "attempts", g.members.join(" → ") + "  (this is attempt " + r[C.attempt] + ")");
    kv(t, "final outcome", g.final_outcome + " after " + g.total_ms + " ms");
    kv(t, "safety", g.safety + (SAFETY.has(g.safety) ? ": " + SAFETY.get(g.safety).description : ""));
    details.appendChild(t);
    const ev = el("ol"); g.evidence.forEach(function (line) { ev.appendChild(el("li", line)); }); details.appendChild(ev);
  }
  function detailsStderr(lines, r) {
    details.appendChild(el("h4", "stderr during the call (" + lines.length + " line" + (lines.length > 1 ? "s" : "") + ")"));
    const box = el("div", null, "stderr");
    lines.forEach(function (line) {
      const row = el("div", null, "stderr-line");
      row.appendChild(el("span", wall(line.t) + " (+" + duration(line.t - r[C.t0]) + ")  ", "muted"));
      row.appendChild(el("span", line.text, "mono"));
      box.appendChild(row);
    });
    details.appendChild(box);
  }
  // A line of a stdio capture: which pipe, when, what.
  function detailsStdioLine(x) {
    const way = x.stdio.stream === "stdin" ? "client → server" : "server → client";
    details.appendChild(el("h4", x.stdio.stream + " line at " + wall(x.t) + " UTC (" + offset(x.t) + "), " + way +
      (x.stdio.bytes !== null && x.stdio.bytes !== undefined ? ", " + x.stdio.bytes + " bytes" : "") + (x.stdio.truncated ? " (cut in the capture)" : "")));
    details.appendChild(el("div", x.request.line, "line mono request-line"));
    if (x.request.body) details.appendChild(el("pre", x.request.body));
    if (x.error) details.appendChild(el("p", "then " + x.error, "muted"));
  }
  // An HTTP exchange: the request, the response (or why there is none) and its SSE events.
  function detailsExchange(x) {
    details.appendChild(el("h4", "Request at " + wall(x.t) + " UTC (" + offset(x.t) + ")"));
    details.appendChild(el("div", x.request.line, "line mono request-line"));
    details.appendChild(headersTable(x.request.headers));
    if (x.request.body) details.appendChild(el("pre", x.request.body));
    if (x.response) {
      details.appendChild(el("h4", "Response  HTTP " + x.response.status));
      details.appendChild(headersTable(x.response.headers));
      if (x.response.body) details.appendChild(el("pre", x.response.body));
    } else {
      details.appendChild(el("p", "No response: " + (x.error || "none recorded"), "muted"));
    }
    if (x.events) {
      details.appendChild(el("h4", "SSE events (" + x.events.length + ")" + (x.stream.ended ? "  stream ended: " + x.stream.ended : "")));
      x.events.forEach(function (e) {
        details.appendChild(el("div", (e.t === null ? "?" : wall(e.t) + " (" + offset(e.t) + ")") + "  " + e.event +
          (e.id !== null ? "  id " + e.id : ""), "muted"));
        if (e.data) details.appendChild(el("pre", e.data));
      });
    }
  }
  function headersTable(headers) {
    const t = el("table");
    Object.keys(headers).forEach(function (k) { kv(t, k, headers[k]); });
    return t;
  }
  function showAggregate(k) {
    const a = aggs[k], lane = data.lanes[a[A.lane]];
    selected = null; selectedAgg = k;
    details.textContent = "";
    delete details.dataset.callId;
    details.dataset.aggregate = String(k);
    details.appendChild(el("h3", "Σ " + a[A.count] + " uneventful calls  " + lane.label));
    details.appendChild(el("p", day(a[A.t0]) + " " + wall(a[A.t0]) + " – " + wall(a[A.t1]) + " UTC  (" + offset(a[A.t0]) +
      " after the first call)", "when"));
    details.appendChild(el("p", "These calls succeeded with no flag, no retry and no repeated run, so this report of " +
      data.meta.calls + " calls counts them instead of listing them (" + data.meta.aggregated + " uneventful calls in all, in buckets of " +
      duration(data.meta.bucket_ms) + " per lane). mcp-blackbox export lists every call.", "muted aggregate-note"));
    const t = el("table", null, "aggregate");
    kv(t, "lane", lane.id);
    kv(t, "outcomes", mix(a[A.outcomes]));
    kv(t, "methods", mix(a[A.methods]));
    if (Object.keys(a[A.tools]).length) kv(t, "tools", mix(a[A.tools]));
    kv(t, "duration", "min " + duration(a[A.dur_min]) + ", p50 " + duration(a[A.dur_p50]) + ", p95 " + duration(a[A.dur_p95]) +
      ", max " + duration(a[A.dur_max]));
    details.appendChild(t);
    renderRows(false); drawTimeline(); writeHash();
  }
  function select(id, opts) {
    opts = opts || {};
    if (byId(id) === null) return;
    selected = id; selectedAgg = null;
    delete details.dataset.aggregate;
    renderRows(false);
    renderDetails(id);
    if (!opts.quiet) { drawTimeline(); writeHash(); }
  }
  // Select a call the table may not show (an attempt in a chain): clear the filters that hide it.
  function reveal(id) {
    const i = indexOf.get(id);
    if (i === undefined) return;
    selected = id;
    if (!shown[i] && !callMatches(i, currentFilters())) { Object.keys(controls).forEach(function (k) { controls[k].value = ""; }); applyFilters(); }
    showInTimeline(id);  // a call outside the zoomed view: the view moves to it, and the table follows
    select(id);
    scrollRowIntoView(id);
    renderRows(false);
    showInTimeline(id);
  }

  // ---- timeline: time axis with idle gaps folded ---------------------------------------------
  // Calls first, then aggregates (call i, aggregate N + k): an aggregate's stretch is busy, never an idle gap.
  const t0s = new Float64Array(N + NA), t1s = new Float64Array(N + NA);
  let span = 1;
  for (let i = 0; i < N + NA; i++) {
    if (i < N) { t0s[i] = calls[i][C.t0]; t1s[i] = t0s[i] + Math.max(0, calls[i][C.dur]); } else { t0s[i] = aggs[i - N][A.t0]; t1s[i] = aggs[i - N][A.t1]; }
    if (t1s[i] > span) span = t1s[i];
  }
  // An idle gap: no call in flight for over GAP_MIN_MS. The longest are folded first, each while it is over
  // GAP_SHARE of the time still drawn to scale (so evenly spread calls keep a linear axis), at most MAX_FOLDS.
  const GAP_MIN_MS = 2000, GAP_SHARE = 0.05, MAX_FOLDS = 50;
  const idle = (function () {
    let order = null;
    for (let i = 1; i < N + NA; i++) if (t0s[i] < t0s[i - 1]) { order = Array.from(t0s.keys()).sort(function (a, b) { return t0s[a] - t0s[b]; }); break; }
    const found = [];
    let end = -Infinity;
    for (let n = 0; n < N + NA; n++) {
      const i = order ? order[n] : n;
      if (end > -Infinity && t0s[i] - end > GAP_MIN_MS) found.push([end, t0s[i]]);
      if (t1s[i] > end) end = t1s[i];
    }
    found.sort(function (a, b) { return (b[1] - b[0]) - (a[1] - a[0]); });
    const folded = [];
    let drawn = span;
    for (let n = 0; n < found.length && folded.length < MAX_FOLDS; n++) {
      const length = found[n][1] - found[n][0];
      if (length <= GAP_SHARE * drawn) break;
      folded.push(found[n]); drawn -= length;
    }
    return folded.sort(function (a, b) { return a[0] - b[0]; });
  })();
  let gapsShown = false;
  let segments = [];  // {r0, r1, d0, d1, gap}: real ms -> display units, piecewise linear
  let totalD = span;
  const dS = new Float64Array(N + NA), dE = new Float64Array(N + NA);
  function buildAxis() {
    segments = [];
    if (gapsShown || !idle.length) {
      segments.push({ r0: 0, r1: Infinity, d0: 0, d1: Infinity, gap: false });
    } else {
      const busy = Math.max(1, span - idle.reduce(function (s, g) { return s + g[1] - g[0]; }, 0));
      const width = Math.min(busy * 0.04, busy * 0.3 / idle.length);
      let r = 0, d = 0;
      idle.forEach(function (g) {
        segments.push({ r0: r, r1: g[0], d0: d, d1: d + g[0] - r, gap: false }); d += g[0] - r;
        segments.push({ r0: g[0], r1: g[1], d0: d, d1: d + width, gap: true }); d += width;
        r = g[1];
      });
      segments.push({ r0: r, r1: Infinity, d0: d, d1: Infinity, gap: false });
    }
    for (let i = 0; i < N + NA; i++) { dS[i] = toDisplay(t0s[i]); dE[i] = toDisplay(t1s[i]); }
    totalD = toDisplay(span);
  }
  function segmentAt(value, key) {
    let lo = 0, hi = segments.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (segments[mid][key] <= value) lo = mid; else hi = mid - 1; }
    return segments[lo];
  }
  function toDisplay(t) {
    const s = segmentAt(t, "r0");
    if (t < s.r0 || !s.gap) return s.d0 + (t - s.r0);
    return s.d0 + (t - s.r0) / (s.r1 - s.r0) * (s.d1 - s.d0);
  }
  function toReal(d) {
    const s = segmentAt(d, "d0");
    if (d < s.d0 || !s.gap) return s.r0 + (d - s.d0);
    return s.r0 + (d - s.d0) / (s.d1 - s.d0) * (s.r1 - s.r0);
  }

  // ---- timeline: rows (group headers and lanes) ---------------------------------------------
  const lineageClient = new Map();
  data.clients.forEach(function (c) { if (!lineageClient.has(c.lineage)) lineageClient.set(c.lineage, c); });
  const laneGroups = data.lane_groups.map(function (g, n) {
    const c = g.lineage === null ? null : lineageClient.get(g.lineage);
    const client = g.lineage === null ? "no client identity" : g.lineage + (c ? " " + (c.client_info || c.user_agent || "") : "");
    return { n: n, source: g.source, label: captureName(g.source) + " · " + client.trim(), lanes: [], calls: 0 };
  });
  data.lanes.forEach(function (lane, i) { laneGroups[lane.group].lanes.push(i); });
  for (let i = 0; i < N; i++) laneGroups[data.lanes[calls[i][C.lane]].group].calls++;
  aggs.forEach(function (a) { laneGroups[data.lanes[a[A.lane]].group].calls += a[A.count]; });
  const groupOrder = laneGroups.slice().sort(function (a, b) { return a.source - b.source || a.n - b.n; });
  const collapsed = new Set();
  let rows = [];
  const rowOfLane = new Int32Array(data.lanes.length);
  function buildRows() {
    rows = [];
    groupOrder.forEach(function (g) {
      const header = rows.length;
      rows.push({ kind: "group", group: g });
      g.lanes.forEach(function (lane) {
        if (collapsed.has(g.n)) { rowOfLane[lane] = header; return; }
        rowOfLane[lane] = rows.length;
        rows.push({ kind: "lane", lane: lane });
      });
    });
  }

  const canvas = document.getElementById("timeline");
  const tip = document.getElementById("tip");
  const LANE = 16, AXIS = 22, LEFT = 170, RIGHT = 10, MAX_ROWS = 40;
  let view = { from: 0, to: 1, rowScroll: 0 };
  let bars = [], aggBars = [], marks = [], drag = null;
  function fullView() { view.from = -totalD * 0.01; view.to = totalD * 1.01; }
  const plotWidth = function () { return Math.max(10, canvas.clientWidth - LEFT - RIGHT); };
  const zoomed = function () { return view.from > -totalD * 0.01 + 1e-6 || view.to < totalD * 1.01 - 1e-6; };
  function sizeCanvas() {
    canvas.style.height = (AXIS + Math.min(rowsFit(), rows.length) * LANE + 4) + "px";
  }
  // The rows the timeline may take: at most MAX_ROWS (at least 6), and only as many as leave the calls table's
  // controls, header and first rows on the first screen under it (the wheel scrolls the lanes).
  const TABLE_RESERVE = 180;
  function rowsFit() {
    const top = canvas.getBoundingClientRect().top + window.scrollY;
    return Math.max(6, Math.min(MAX_ROWS, Math.floor((window.innerHeight - top - TABLE_RESERVE - AXIS - 4) / LANE)));
  }
  // On opening, more rows than fit and more than one group: the groups with the most lanes are folded (their calls
  // drawn in their header row) until the rest fits, so that every call is in view. A click unfolds one.
  function foldToFit() {
    const fit = rowsFit();
    const biggest = laneGroups.slice().sort(function (a, b) { return b.lanes.length - a.lanes.length || a.n - b.n; });
    for (let k = 0; k < biggest.length && rows.length > fit && laneGroups.length > 1; k++) {
      if (biggest[k].lanes.length < 2) break;  // folding a group of one lane saves no row
      collapsed.add(biggest[k].n);
      buildRows();
    }
  }
  const rowsShown = function () { return Math.floor((canvas.clientHeight - AXIS) / LANE); };
  const STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5, 72e5, 216e5, 432e5, 864e5];

  // One frame of the timeline: the canvas cleared at the device's pixel ratio, its size, the rows in view and
  // the mapping from display units to x.
  function timelineFrame() {
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth, height = canvas.clientHeight;
    canvas.width = width * ratio; canvas.height = height * ratio;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const scale = plotWidth() / (view.to - view.from);
    return {
      ctx: ctx, width: width, height: height, scale: scale, shownRows: rowsShown(),
      X: function (d) { return LEFT + (d - view.from) * scale; },
    };
  }
  function drawTimeline() {
    const f = timelineFrame(), ctx = f.ctx;
    ctx.font = "11px sans-serif"; ctx.textBaseline = "alphabetic";
    // rows: backgrounds now, labels after the folded gaps so that no break mark covers them
    drawRowBackgrounds(f);
    ctx.save(); ctx.beginPath(); ctx.rect(LEFT, 0, f.width - LEFT, f.height); ctx.clip();
    marks = drawGaps(f);
    const axis = drawAxis(f);
    ctx.restore();
    drawRowLabels(f);
    ctx.fillStyle = "#1d2330"; ctx.font = "bold 11px sans-serif";
    ctx.fillText("UTC " + day(Math.max(0, toReal(view.from))), 4, 11);
    ctx.font = "11px sans-serif";
    // bars: the calls the filters show; the others faint, for context
    ctx.save(); ctx.beginPath(); ctx.rect(LEFT, AXIS, f.width - LEFT, f.height - AXIS); ctx.clip();
    aggBars = drawAggregateBars(f);
    const drawn = drawCallBars(f);
    bars = drawn.bars;
    drawChains(ctx, drawn.positions);
    drawDragSelection(f);
    ctx.restore();
    canvas.dataset.bars = String(bars.length);
    canvas.dataset.aggregateBars = String(aggBars.length);
    canvas.dataset.axis = axis.join(" | ");
    canvas.dataset.gaps = marks.map(function (m) { return m.label; }).join(" | ");
    const from = toReal(view.from), to = toReal(view.to);
    document.getElementById("view-range").textContent = "showing " + wall(from) + " – " + wall(to) + " UTC (" +
      duration(to - from) + (idle.length && !gapsShown ? ", " + idle.length + " idle gap" + (idle.length === 1 ? "" : "s") + " folded" : "") + ")";
  }
  function drawRowBackgrounds(f) {
    for (let v = 0; v < f.shownRows && v + view.rowScroll < rows.length; v++) {
      f.ctx.fillStyle = rows[v + view.rowScroll].kind === "group" ? "#e9edf5" : v % 2 ? "#fcfcfd" : "#f5f6f8";
      f.ctx.fillRect(0, AXIS + v * LANE, f.width, LANE);
    }
  }
  // Folded idle gaps: a hatched break with a zig-zag and what was left out. Returns the marks drawn (for the tip).
  function drawGaps(f) {
    const ctx = f.ctx, drawn = [];
    segments.forEach(function (s) {
      if (!s.gap) return;
      const x0 = f.X(s.d0), x1 = f.X(s.d1);
      if (x1 < LEFT || x0 > f.width) return;
      ctx.fillStyle = "#f2f4f7"; ctx.fillRect(x0, AXIS, x1 - x0, f.height - AXIS);
      ctx.strokeStyle = "#98a2b3"; ctx.lineWidth = 1;
      zigzag(ctx, x0 + 2, f.height);
      zigzag(ctx, x1 - 2, f.height);
      const label = "⋯ " + duration(s.r1 - s.r0) + " idle";
      const fits = ctx.measureText(label).width + 6 <= Math.max(x1 - x0, 0) + 40;
      const text = fits ? label : "⋯";
      ctx.fillStyle = "#b54708";
      ctx.fillText(text, (x0 + x1) / 2 - ctx.measureText(text).width / 2, 20);
      drawn.push({ x0: x0, x1: x1, label: label, from: s.r0, to: s.r1 });
    });
    return drawn;
  }
  function zigzag(ctx, x, height) {
    ctx.beginPath();
    for (let y = AXIS, k = 0; y <= height; y += 4, k++) { if (k) ctx.lineTo(x + (k % 2 ? 2 : -2), y); else ctx.moveTo(x, y); }
    ctx.stroke();
  }
  // The wall-clock axis: round UTC times within each stretch drawn to scale. Returns the labels written.
  function drawAxis(f) {
    const ctx = f.ctx, axis = [];
    const msPerPx = 1 / f.scale;
    const step = STEPS.find(function (s) { return s >= msPerPx * 110; }) || STEPS[STEPS.length - 1];
    let lastRight = -Infinity, ticks = 0;
    segments.forEach(function (s) {
      if (s.gap) return;
      const a = Math.max(s.r0, toReal(view.from)), b = Math.min(s.r1, toReal(view.to));
      if (!(b > a)) return;
      for (let abs = Math.ceil((START_MS + a) / step) * step; abs <= START_MS + b && ticks < 400; abs += step, ticks++) {
        const t = abs - START_MS, x = f.X(toDisplay(t));
        ctx.fillStyle = "#eaecf0"; ctx.fillRect(x, AXIS, 1, f.height - AXIS);
        let label = wall(t);
        if (step >= 1000) label = label.slice(0, 8);
        const w = ctx.measureText(label).width;
        if (x - w / 2 > lastRight + 8 && x - w / 2 >= LEFT - 2) {
          ctx.fillStyle = "#475467"; ctx.fillText(label, x - w / 2, 11);
          lastRight = x + w / 2; axis.push(label);
        }
      }
    });
    return axis;
  }
  function drawRowLabels(f) {
    const ctx = f.ctx;
    for (let v = 0; v < f.shownRows && v + view.rowScroll < rows.length; v++) {
      const row = rows[v + view.rowScroll], y = AXIS + v * LANE;
      if (row.kind === "group") {
        drawGroupLabel(f, row.group, y);
      } else {
        ctx.fillStyle = "#475467";
        ctx.save(); ctx.beginPath(); ctx.rect(0, y, LEFT - 4, LANE); ctx.clip();
        ctx.fillText(data.lanes[row.lane].label, 14, y + 12); ctx.restore();
      }
    }
  }
  function drawGroupLabel(f, g, y) {
    const ctx = f.ctx, folded = collapsed.has(g.n);
    const text = (folded ? "▸ " : "▾ ") + g.label + " · " + g.lanes.length + " lane" + (g.lanes.length === 1 ? "" : "s") + ", " + g.calls + " call" + (g.calls === 1 ? "" : "s");
    ctx.font = "bold 11px sans-serif";
    ctx.save(); ctx.beginPath(); ctx.rect(0, y, folded ? LEFT - 4 : f.width, LANE); ctx.clip();
    if (!folded) { ctx.fillStyle = "rgba(233, 237, 245, 0.85)"; ctx.fillRect(0, y, ctx.measureText(text).width + 10, LANE); }
    ctx.fillStyle = "#1d2330"; ctx.fillText(text, 4, y + 12); ctx.restore();
    ctx.font = "11px sans-serif";
  }
  // Where a bar from display time s to e goes in its lane's row (or its folded group's header); null out of view.
  function barPlace(f, lane, s, e) {
    const rowIndex = rowOfLane[lane];
    const v = rowIndex - view.rowScroll;
    if (v < 0 || v >= f.shownRows) return null;
    const x0 = f.X(s), x1 = Math.max(x0 + 2, f.X(e));
    if (x1 < LEFT || x0 > f.width) return null;
    const header = rows[rowIndex].kind === "group";
    return { x0: x0, x1: x1, y: AXIS + v * LANE + (header ? 5 : 3), h: header ? LANE - 10 : LANE - 6, header: header };
  }
  // Aggregates first, under the calls: faint bars of their dominant outcome's colour, framed. Returns the bars drawn.
  function drawAggregateBars(f) {
    const ctx = f.ctx, drawn = [];
    for (let k = 0; k < NA; k++) {
      const a = aggs[k];
      const b = barPlace(f, a[A.lane], dS[N + k], dE[N + k]);
      if (b === null) continue;
      ctx.globalAlpha = aggShown[k] ? 0.35 : 0.06;
      ctx.fillStyle = colorOf(Object.keys(a[A.outcomes])[0]);
      ctx.fillRect(b.x0, b.y, b.x1 - b.x0, b.h);
      if (!aggShown[k]) continue;
      ctx.globalAlpha = 0.8; ctx.strokeStyle = k === selectedAgg && selected === null ? "#101828" : "#98a2b3"; ctx.lineWidth = 1;
      ctx.strokeRect(b.x0 + 0.5, b.y + 0.5, Math.max(1, b.x1 - b.x0 - 1), b.h - 1);
      drawn.push({ aggregate: k, x0: b.x0, x1: b.x1, y: b.y, h: b.h });
    }
    ctx.globalAlpha = 1;
    return drawn;
  }
  // The calls, in their outcome's colour (faint when the filters hide them), the selected one framed. Returns the
  // bars drawn and where each call of a retry chain is (for drawChains).
  function drawCallBars(f) {
    const ctx = f.ctx, drawn = [], positions = new Map();
    let selectedBar = null;
    for (let i = 0; i < N; i++) {
      const r = calls[i];
      const b = barPlace(f, r[C.lane], dS[i], dE[i]);
      if (b === null) continue;
      ctx.globalAlpha = shown[i] ? 1 : 0.12;
      ctx.fillStyle = colorOf(r[C.outcome]);
      ctx.fillRect(b.x0, b.y, b.x1 - b.x0, b.h);
      if (!shown[i]) continue;
      if (!b.header) drawTicks(f, r[C.id], b);
      const bar = { id: r[C.id], x0: b.x0, x1: b.x1, y: b.y, h: b.h };
      drawn.push(bar);
      if (r[C.id] === selected) selectedBar = bar;
      if (r[C.group]) positions.set(r[C.id], { x: (b.x0 + b.x1) / 2, y: b.y + b.h / 2 });
    }
    ctx.globalAlpha = 1;
    if (selectedBar) {
      ctx.strokeStyle = "#101828"; ctx.lineWidth = 2;
      ctx.strokeRect(selectedBar.x0 - 1, selectedBar.y - 1, selectedBar.x1 - selectedBar.x0 + 2, selectedBar.h + 2);
    }
    return { bars: drawn, positions: positions };
  }
  // A call's SSE events (marks across its bar) and stderr lines (short marks under it).
  function drawTicks(f, id, b) {
    const ctx = f.ctx;
    const ticksOf = eventTicks.get(id);
    if (ticksOf) {
      ctx.fillStyle = "#101828";
      ticksOf.forEach(function (t) { ctx.fillRect(f.X(toDisplay(t)), b.y - 2, 1, LANE - 2); });
    }
    const stderrOf = stderrTicks.get(id);
    if (stderrOf) {
      ctx.fillStyle = "#7a2e0e";
      stderrOf.forEach(function (t) { ctx.fillRect(f.X(toDisplay(t)) - 1, b.y + b.h - 3, 3, 5); });
    }
  }
  // Retry chains: attempts linked by a line.
  function drawChains(ctx, positions) {
    ctx.strokeStyle = "#101828"; ctx.lineWidth = 1; ctx.setLineDash([3, 3]);
    data.groups.forEach(function (g) {
      for (let i = 1; i < g.members.length; i++) {
        const a = positions.get(g.members[i - 1]), b = positions.get(g.members[i]);
        if (a && b) { ctx.beginPath(); ctx.moveTo(a.x, a.y); ctx.lineTo(b.x, b.y); ctx.stroke(); }
      }
    });
    ctx.setLineDash([]);
  }
  // The stretch being dragged out to zoom into.
  function drawDragSelection(f) {
    if (!drag || drag.mode !== "select" || !drag.moved) return;
    const ctx = f.ctx;
    const a = Math.max(LEFT, Math.min(drag.x, drag.cx)), b = Math.min(f.width, Math.max(drag.x, drag.cx));
    ctx.fillStyle = "rgba(47, 91, 211, 0.15)"; ctx.fillRect(a, AXIS, b - a, f.height - AXIS);
    ctx.strokeStyle = "#2f5bd3"; ctx.strokeRect(a, AXIS, b - a, f.height - AXIS);
  }

  // ---- timeline: pointer, wheel and zoom -------------------------------------------------------
  function localPoint(e) { const rect = canvas.getBoundingClientRect(); return { x: e.clientX - rect.left, y: e.clientY - rect.top }; }
  function barAt(p) {
    for (let i = bars.length - 1; i >= 0; i--) {
      const b = bars[i];
      if (p.x >= b.x0 - 1 && p.x <= b.x1 + 1 && p.y >= b.y - 1 && p.y <= b.y + b.h + 1) return b;
    }
    for (let i = aggBars.length - 1; i >= 0; i--) {
      const b = aggBars[i];
      if (p.x >= b.x0 - 1 && p.x <= b.x1 + 1 && p.y >= b.y - 1 && p.y <= b.y + b.h + 1) return b;
    }
    return null;
  }
  function rowAt(p) {
    if (p.y < AXIS) return null;
    const n = Math.floor((p.y - AXIS) / LANE) + view.rowScroll;
    return n < rows.length ? rows[n] : null;
  }
  const displayAt = function (x) { return view.from + (x - LEFT) / plotWidth() * (view.to - view.from); };
  function zoomTo(from, to) {
    if (!(to > from)) return;
    const min = 0.05;  // 50 microseconds across the plot
    if (to - from < min) { const mid = (from + to) / 2; from = mid - min / 2; to = mid + min / 2; }
    view.from = from; view.to = to;
    viewCommitted();
  }
  function zoomBy(factor, at) {
    if (at === undefined) at = (view.from + view.to) / 2;
    zoomTo(at - (at - view.from) * factor, at + (view.to - at) * factor);
  }
  function scrollRows(delta) {
    const most = Math.max(0, rows.length - rowsShown());
    const next = Math.max(0, Math.min(most, view.rowScroll + delta));
    if (next === view.rowScroll) return false;
    view.rowScroll = next; drawTimeline(); return true;
  }
  function showInTimeline(id) {
    const i = indexOf.get(id);
    if (i === undefined) return;
    const g = data.lanes[calls[i][C.lane]].group;
    if (collapsed.has(g)) { collapsed.delete(g); buildRows(); sizeCanvas(); }
    const width = view.to - view.from;
    if (dE[i] < view.from || dS[i] > view.to) { const mid = (dS[i] + dE[i]) / 2; view.from = mid - width / 2; view.to = mid + width / 2; }
    const row = rowOfLane[calls[i][C.lane]];
    if (row < view.rowScroll || row >= view.rowScroll + rowsShown()) view.rowScroll = Math.max(0, row - 2);
    viewCommitted();
  }
  function zoomToSelected() {
    if (selected === null) return;
    const r = byId(selected), g = chainOf(r);
    const ids = g ? g.members : [selected];
    let a = Infinity, b = -Infinity;
    ids.forEach(function (id) { const i = indexOf.get(id); if (i !== undefined) { a = Math.min(a, dS[i]); b = Math.max(b, dE[i]); } });
    const pad = Math.max((b - a) * 0.25, 5);
    zoomTo(a - pad, b + pad);
    showInTimeline(selected);
  }
  canvas.addEventListener("mousedown", function (e) {
    if (e.button !== 0) return;
    const p = localPoint(e);
    drag = { mode: e.shiftKey ? "pan" : "select", x: p.x, y: p.y, cx: p.x, from: view.from, to: view.to, rows: view.rowScroll, moved: false };
    e.preventDefault();
    canvas.focus();
  });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    const p = localPoint(e);
    if (Math.abs(p.x - drag.x) + Math.abs(p.y - drag.y) > 3) drag.moved = true;
    if (!drag.moved) return;
    if (drag.mode === "pan") {
      const per = (drag.to - drag.from) / plotWidth();
      view.from = drag.from - (p.x - drag.x) * per; view.to = drag.to - (p.x - drag.x) * per;
      view.rowScroll = Math.max(0, Math.min(Math.max(0, rows.length - rowsShown()), drag.rows - Math.round((p.y - drag.y) / LANE)));
    } else {
      drag.cx = p.x;
    }
    drawTimeline();
  });
  window.addEventListener("mouseup", function (e) {
    if (!drag) return;
    const d = drag, p = localPoint(e);
    drag = null;
    if (!d.moved) {
      const b = barAt(p);
      if (b && b.aggregate !== undefined) { showAggregate(b.aggregate); scrollItemIntoView(-b.aggregate - 1); renderRows(false); return; }
      if (b) { select(b.id); scrollRowIntoView(b.id); renderRows(false); return; }
      const row = rowAt(p);
      if (row && row.kind === "group") {
        if (collapsed.has(row.group.n)) collapsed.delete(row.group.n); else collapsed.add(row.group.n);
        buildRows(); sizeCanvas(); scrollRows(0); drawTimeline();
      }
      return;
    }
    if (d.mode === "pan") { viewCommitted(); return; }
    const a = Math.max(LEFT, Math.min(d.x, p.x)), b = Math.min(canvas.clientWidth - RIGHT, Math.max(d.x, p.x));
    if (b - a >= 4) zoomTo(displayAt(a), displayAt(b)); else drawTimeline();
  });
  // What the tip says at point p: a bar's call or aggregate, a folded gap, a group header, a lane's id; or null.
  function tipAt(p) {
    const b = barAt(p);
    if (b && b.aggregate !== undefined) return aggregateTip(aggs[b.aggregate]);
    if (b) return callTip(b.id);
    const m = marks.find(function (g) { return p.x >= g.x0 && p.x <= g.x1 && p.y >= AXIS; });
    const row = rowAt(p);
    if (m) return m.label + ": " + wall(m.from) + " – " + wall(m.to) + " UTC, folded (\"show idle gaps\" draws it to scale)";
    if (row && row.kind === "group") return row.group.label + " — click to " + (collapsed.has(row.group.n) ? "unfold" : "fold");
    if (row && p.x < LEFT) return data.lanes[row.lane].id;
    return null;
  }
  function aggregateTip(a) {
    return "Σ " + aggregateSummary(a) + "\n" + wall(a[A.t0]) + " – " + wall(a[A.t1]) + " UTC · " + data.lanes[a[A.lane]].label;
  }
  function callTip(id) {
    const r = byId(id);
    return id + " " + (r[C.method] || "(response)") + (r[C.tool] ? " " + r[C.tool] : "") + ": " + r[C.outcome] +
      (r[C.flags] ? " [" + r[C.flags] + "]" : "") + " — " + r[C.verdict] + "\n" + wall(r[C.t0]) + " UTC (" + offset(r[C.t0]) +
      "), took " + duration(r[C.dur]) + " · " + who(r);
  }
  canvas.addEventListener("mousemove", function (e) {
    if (drag) { tip.style.display = "none"; return; }
    const p = localPoint(e);
    const text = tipAt(p);
    if (text === null) { tip.style.display = "none"; return; }
    tip.textContent = text;
    tip.style.display = "block";
    tip.style.left = Math.max(0, Math.min(p.x + 12, canvas.clientWidth - 420)) + "px";
    tip.style.top = (p.y + 14) + "px";
  });
  canvas.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  canvas.addEventListener("wheel", function (e) {
    if (e.ctrlKey || e.metaKey) {  // pinch on a trackpad, or ctrl-wheel: zoom around the pointer
      e.preventDefault();
      zoomBy(e.deltaY > 0 ? 1.25 : 0.8, displayAt(localPoint(e).x));
      return;
    }
    if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      e.preventDefault();
      const shift = (e.shiftKey ? e.deltaY || e.deltaX : e.deltaX) / plotWidth() * (view.to - view.from);
      view.from += shift; view.to += shift; viewCommitted();
      return;
    }
    if (scrollRows(e.deltaY > 0 ? 3 : -3)) e.preventDefault();  // at either end the page scrolls on
  }, { passive: false });
  document.getElementById("reset-zoom").addEventListener("click", function () {
    fullView(); view.rowScroll = 0; viewCommitted();
  });
  const gapButton = document.getElementById("toggle-gaps");
  if (!idle.length) { gapButton.disabled = true; gapButton.title = "No idle gap long enough to fold"; }
  function setGaps(on) {
    const from = toReal(view.from), to = toReal(view.to), wasZoomed = zoomed();
    gapsShown = on;
    gapButton.setAttribute("aria-pressed", on ? "true" : "false");
    gapButton.textContent = on ? "fold idle gaps" : "show idle gaps";
    buildAxis();
    if (wasZoomed) { view.from = toDisplay(from); view.to = toDisplay(to); } else fullView();
  }
  gapButton.addEventListener("click", function () { setGaps(!gapsShown); viewCommitted(); });

  // ---- keyboard -------------------------------------------------------------------------------
  function step(by) {
    const items = NA ? visible.filter(function (i) { return i >= 0; }) : visible;  // the keys step through calls
    if (!items.length) return;
    const at = selected === null ? -1 : items.indexOf(indexOf.get(selected));
    const next = at < 0 ? (by > 0 ? 0 : items.length - 1) : Math.max(0, Math.min(items.length - 1, at + by));
    const id = calls[items[next]][C.id];
    select(id, { quiet: true });
    scrollRowIntoView(id);
    renderRows(false);
    showInTimeline(id);
  }
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented) return;
    const target = e.target;
    const tag = target && target.tagName ? target.tagName.toLowerCase() : "";
    if (tag === "input" || tag === "select" || tag === "textarea" || (target && target.isContentEditable)) {
      if (e.key === "Escape" && tag === "input") target.blur();
      return;
    }
    const onButton = tag === "button" || tag === "a" || tag === "summary";
    if (pageKey(e.key, onButton)) e.preventDefault();
  });
  // A key pressed outside the fields: true when the page used it.
  function pageKey(key, onButton) {
    switch (key) {
      case "ArrowDown": case "j": step(1); return true;
      case "ArrowUp": case "k": step(-1); return true;
      case "ArrowLeft": case "ArrowRight": {
        const shift = (key === "ArrowLeft" ? -0.2 : 0.2) * (view.to - view.from);
        view.from += shift; view.to += shift; viewCommitted(); return true;
      }
      case "+": case "=": zoomBy(0.6); return true;
      case "-": case "_": zoomBy(1 / 0.6); return true;
      case "Enter":
        if (onButton) return false;  // the button's own Enter
        zoomToSelected(); return true;
      case "Escape":
        if (drag) { drag = null; drawTimeline(); } else { fullView(); view.rowScroll = 0; viewCommitted(); }
        return true;
      case "/": controls.q.focus(); return true;
      default: return false;
    }
  }

  // ---- the address: #call=…&outcome=…&q=…&zoom=from~to (ms after the first call) ---------------
  const HASH_KEYS = ["outcome", "layer", "method", "tool", "session", "flag", "set", "q"];
  let written = null;
  let restoring = true;
  function writeHash() {
    if (restoring) return;
    const params = new URLSearchParams();
    if (selected !== null) params.set("call", selected);
    HASH_KEYS.forEach(function (k) { if (controls[k].value) params.set(k, controls[k].value); });
    if (zoomed()) params.set("zoom", Math.round(toReal(view.from) * 1000) / 1000 + "~" + Math.round(toReal(view.to) * 1000) / 1000);
    if (gapsShown) params.set("gaps", "shown");
    if (sortKey !== null) params.set("sort", sortText());
    const hash = "#" + params.toString();
    if (hash === (location.hash || "#")) return;
    written = hash;
    try { history.replaceState(null, "", hash); } catch { location.replace(hash); }
  }
  function readHash() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    HASH_KEYS.forEach(function (k) { controls[k].value = params.get(k) || ""; });
    setGaps(params.get("gaps") === "shown");
    setSort(params.get("sort") || "");
    const zoom = (params.get("zoom") || "").split("~").map(Number);
    fullView();
    if (zoom.length === 2 && isFinite(zoom[0]) && isFinite(zoom[1]) && zoom[1] > zoom[0]) {
      view.from = toDisplay(zoom[0]); view.to = toDisplay(zoom[1]);
    }
    const call = params.get("call");
    return call && indexOf.has(call) ? call : null;
  }
  function restore() {
    restoring = true;
    const call = readHash();
    selected = null;
    applyFilters();
    let first = call;
    if (first === null || !shown[indexOf.get(first)]) {
      const failure = visible.find(function (i) { return i >= 0 && isFailure(calls[i][C.outcome]); });
      const any = firstCall();
      first = failure !== undefined ? calls[failure][C.id] : (any !== null ? calls[any][C.id] : null);
    }
    if (first !== null) { select(first, { quiet: true }); scrollRowIntoView(first); renderRows(false); } else showNothing();
    drawTimeline();
    restoring = false;
    writeHash();
  }
  window.addEventListener("hashchange", function () { if (location.hash !== written) restore(); });

  window.addEventListener("resize", function () { sizeCanvas(); scrollRows(0); drawTimeline(); renderRows(false); });
  const range = document.getElementById("time-range");
  const isoSeconds = function (seconds) { return new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 23); };
  range.textContent = isoSeconds(Number(range.dataset.start)) + " – " + isoSeconds(Number(range.dataset.end)) + " UTC";
  document.getElementById("flag-row").hidden = !Object.keys(data.meta.flags).filter(flagShown).length;

  buildAxis();
  buildRows();
  foldToFit();
  sizeCanvas();
  fullView();
  restore();
  // For tests and for debugging from the console: what is drawn where, read-only copies.
  window.__report = {
    bars: function () { return bars.map(function (b) { return { id: b.id, x0: b.x0, x1: b.x1, y: b.y, h: b.h }; }); },
    rows: function () {
      return rows.map(function (row, n) {
        const v = n - view.rowScroll;
        return { kind: row.kind, label: row.kind === "group" ? row.group.label : data.lanes[row.lane].label,
          y: v >= 0 && v < rowsShown() ? AXIS + v * LANE : null, h: LANE, collapsed: row.kind === "group" && collapsed.has(row.group.n) };
      });
    },
    view: function () { return { from: toReal(view.from), to: toReal(view.to), gapsShown: gapsShown, idleGaps: idle.length, left: LEFT }; },
    selected: function () { return selected; },
    visible: function () { return visible.filter(function (i) { return i >= 0; }).map(function (i) { return calls[i][C.id]; }); },
    aggregates: function () {
      return visible.filter(function (i) { return i < 0; }).map(function (i) { return { index: -i - 1, count: aggs[-i - 1][A.count] }; });
    },
    aggregateBars: function () { return aggBars.map(function (b) { return { aggregate: b.aggregate, x0: b.x0, x1: b.x1, y: b.y, h: b.h }; }); },
  };
  window.__reportReady = true;
})();
