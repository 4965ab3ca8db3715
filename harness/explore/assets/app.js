// The explorer's pages, drawn from data/release.js and the pool files (data/pool-NNN.js), which
// are loaded through <script> elements: a browser refuses fetch() of local files opened from disk.
"use strict";

const R = window.MMLE_RELEASE;
window.MMLE_POOLS = window.MMLE_POOLS || {};
const PAGE_SIZE = 20;  // queries per page of a pool's list
const WINDOW = 320;    // characters shown either side of an edit before "show all"
const PLACEHOLDER = "<|image|>";
const STAT_NAMES = {words: "words", type_token_ratio: "distinct words / words", hapax_share: "words used once",
  mean_word_length: "mean word length", capitalised_share: "capitalised", digit_share: "with digits",
  sentence_words_mean: "words per sentence", sentence_words_sd: "sentence length sd"};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "onclick" || key === "onchange") node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function pct(x) { return x === null || x === undefined ? "–" : (100 * x).toFixed(1); }
function lengthName(n) { return n >= 1024 && n % 1024 === 0 ? (n / 1024) + "k" : String(n); }
function fmtBytes(n) { return (n / 1e6).toFixed(1) + " MB"; }  // MB of 10^6 bytes, as the summaries print them

function hashState() {
  return new URLSearchParams(location.hash.replace(/^#/, ""));
}
function go(params) {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") search.set(k, v);
  location.hash = search.toString();
}

const loading = {};
function loadPool(entry) {
  if (window.MMLE_POOLS[entry.pool]) return Promise.resolve(window.MMLE_POOLS[entry.pool]);
  if (!loading[entry.pool]) {
    loading[entry.pool] = new Promise((resolve, reject) => {
      const script = el("script", {src: entry.file});
      script.onload = () => resolve(window.MMLE_POOLS[entry.pool]);
      script.onerror = () => reject(new Error("cannot load " + entry.file));
      document.head.append(script);
    });
  }
  return loading[entry.pool];
}

function thumb(key, mark, index) {
  const info = R.images[key];
  const img = el("img", {src: "img/" + (info ? info[0] : key + ".jpg"), loading: "lazy", alt: "image " + (index + 1),
    width: info ? info[1] : null, height: info ? info[2] : null});
  return el("span", {class: "thumb" + (mark ? " im-" + mark.kind : ""), "data-image-index": index,
    title: mark ? mark.label : null}, img, mark ? el("span", {class: "cap", text: mark.label}) : null);
}

// ---- home: Table 1, Figure 1, the pools table with filters, the variant-confusion table ----------

function renderHome(app, state) {
  app.append(el("h2", {text: "Table 1 (measured from this release, the paper's figures beside)"}), table1());
  for (const figure of R.figures) {
    app.append(el("h2", {text: figure.includes("figure1") ? "Figure 1: candidate lengths by task" : "Candidate lengths"}),
      el("div", {class: "figure"}, el("img", {src: figure, alt: "Figure 1", loading: "lazy"})));
  }
  app.append(el("h2", {text: "Pools"}), poolsTable(state));
  if (R.confusion.length) app.append(el("h2", {text: "Variant confusion: how often each model's top-1 is each kind of candidate"}),
    confusionTables());
}

function table1() {
  const paper = Object.fromEntries(R.paper_table1.rows.map(r => [r.key, r]));
  const head = el("tr", {}, ["Source", "Task", "Modality", "Pools", "Queries (paper)", "Corpus (paper)",
    "Candidates ranked per query (paper)", "Candidates made per query", "Per length: queries/candidates"]
    .map(h => el("th", {text: h})));
  const rows = R.table1.map(r => {
    const p = paper[r.key] || {};
    const both = (ours, theirs) => ours + (theirs === null || theirs === undefined ? "" : " (" + theirs + ")");
    return el("tr", {}, el("td", {text: r.dataset}), el("td", {text: r.task}), el("td", {text: r.modality}),
      el("td", {class: "num", text: r.pools}), el("td", {class: "num", text: both(r.queries, p.queries)}),
      el("td", {class: "num", text: both(r.corpus, p.corpus)}),
      el("td", {class: "num", text: both(r.candidates_ranked_per_query, p.candidates_ranked_per_query)}),
      el("td", {class: "num", text: String(r.candidates_made_per_query)}),
      el("td", {text: r.per_length.map(x => x.text).join("; ")}));
  });
  return el("table", {id: "table1"}, el("thead", {}, head), el("tbody", {}, rows));
}

const FILTERS = ["task", "length", "difficulty", "modality"];

function poolsTable(state) {
  const chosen = Object.fromEntries(FILTERS.map(f => [f, state.get(f) || ""]));
  const filters = el("div", {class: "filters"}, FILTERS.map(f => {
    const values = [...new Set(R.pools.map(p => String(p[f])))].sort((a, b) => f === "length" ? a - b : a.localeCompare(b));
    const select = el("select", {id: "filter-" + f, onchange: () => {
      const params = Object.fromEntries(hashState());
      params[f] = select.value;
      go(params);
    }}, el("option", {value: "", text: "all"}), values.map(v => el("option", {value: v, text: f === "length" ? lengthName(+v) : v})));
    select.value = chosen[f];
    return el("label", {}, f + " ", select);
  }));
  const shown = R.pools.filter(p => FILTERS.every(f => !chosen[f] || String(p[f]) === chosen[f]));
  const head = el("tr", {}, ["Pool", "Task", "Dataset", "Difficulty", "Length", "Modality", "Queries", "Candidates"]
    .map(h => el("th", {text: h})), R.models.map(m => el("th", {text: m + ": P@1 (wrong)"})));
  const body = shown.map(p => el("tr", {"data-pool": p.pool},
    el("td", {}, el("a", {href: "#pool=" + encodeURIComponent(p.pool)}, p.pool)), el("td", {text: p.task}),
    el("td", {text: p.dataset}), el("td", {text: p.difficulty}), el("td", {class: "num", text: lengthName(p.length)}),
    el("td", {text: p.modality}), el("td", {class: "num", text: p.n_queries}), el("td", {class: "num", text: p.n_candidates}),
    R.models.map(m => {
      const o = (p.models || {})[m];
      return el("td", {class: "num", text: o ? pct(o.p_at_1) + " (" + o.wrong + ")" : "–"});
    })));
  return el("div", {}, filters, el("p", {id: "pools-count", text: shown.length + " of " + R.pools.length + " pools"}),
    el("table", {id: "pools-table"}, el("thead", {}, head), el("tbody", {}, body)));
}

function labelOrder(label) {
  // as harness/report/tables.py orders them: positive, hard variants, easy negatives (other_...), other queries'
  const rank = {positive: 0, other_query: 3}[label] ?? (label === "easy_negative" || label.startsWith("other_") ? 2 : 1);
  return [rank, label];
}

function confusionTables() {
  const out = el("div", {id: "confusion"});
  out.append(el("p", {class: "muted", text: "Share of queries (x100) whose top-1 is each kind of candidate; ties at the " +
    "top share a query equally; 95% bootstrap interval over the cell's queries (from 10 queries)."}));
  for (const dataset of [...new Set(R.confusion.map(r => r.dataset))]) {
    const mine = R.confusion.filter(r => r.dataset === dataset);
    const labels = [...new Set(mine.flatMap(r => Object.keys(r.top1)))]
      .sort((a, b) => { const x = labelOrder(a), y = labelOrder(b); return x[0] - y[0] || x[1].localeCompare(y[1]); });
    const head = el("tr", {}, ["Difficulty", "Length", "Model", "n"].map(h => el("th", {text: h})), labels.map(l => el("th", {text: l})));
    const rows = mine.map(r => el("tr", {}, el("td", {text: r.difficulty}), el("td", {text: lengthName(r.length)}),
      el("td", {text: r.model}), el("td", {class: "num", text: r.queries}), labels.map(l => {
        const s = r.top1[l];
        return el("td", {class: "num", text: s ? pct(s.share) + (s.ci95 ? " [" + pct(s.ci95[0]) + ", " + pct(s.ci95[1]) + "]" : "") : "–"});
      })));
    out.append(el("h3", {text: dataset}), el("table", {class: "confusion", "data-dataset": dataset},
      el("thead", {}, head), el("tbody", {}, rows)));
  }
  return out;
}

// ---- one pool: its queries (paginated, filtered) and one query's candidates side by side ---------

function renderPool(app, state, entry, pool) {
  const wrongFor = state.get("wrong") || "";
  const picks = wrongFor ? pool.results[wrongFor] || [] : null;
  const indices = pool.queries.map((_, i) => i).filter(i => !picks || (picks[i] && picks[i][4] < 1));
  const page = Math.min(+(state.get("page") || 0), Math.max(0, Math.ceil(indices.length / PAGE_SIZE) - 1));
  // qid: a query by its _id, as `mmle compare` links the queries that flipped
  const byId = state.has("qid") ? pool.queries.findIndex(q => q.id === state.get("qid")) : -1;
  const selected = byId >= 0 ? byId : state.has("q") ? +state.get("q") : indices[page * PAGE_SIZE];
  const params = (extra) => Object.assign({pool: entry.pool, wrong: wrongFor, page: page, q: selected}, extra);

  const f = pool.facts;
  app.append(el("h2", {text: entry.pool}), el("p", {class: "facts"},
    `${f.task} · ${f.dataset} · ${f.difficulty} · ${lengthName(f.length)} tokens (band ${f.band_min}–${f.band_max})` +
    (f.depth !== null && f.depth !== undefined ? ` · nominal depth ${f.depth}%` : "") +
    ` · ${f.modality} candidates · ${pool.candidates.length} candidates`));
  const select = el("select", {id: "wrong-filter", onchange: () => go(params({wrong: select.value, page: 0, q: ""}))},
    el("option", {value: "", text: "every query"}), R.models.map(m => el("option", {value: m, text: "queries " + m + " got wrong"})));
  select.value = wrongFor;
  const pages = Math.max(1, Math.ceil(indices.length / PAGE_SIZE));
  const list = el("ol", {class: "qlist", id: "query-list", start: page * PAGE_SIZE + 1},
    indices.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE).map(i => {
      const q = pool.queries[i];
      const marks = R.models.filter(m => pool.results[m] && pool.results[m][i]).map(m => {
        const p = pool.results[m][i];
        return el("span", {class: p[4] >= 1 ? "ok" : "bad", title: m + ": P@1 " + p[4]}, " " + (p[4] >= 1 ? "✓" : "✗") + m);
      });
      return el("li", {class: i === selected ? "selected" : null, "data-query": i, onclick: () => go(params({q: i}))},
        (q.text.length > 140 ? q.text.slice(0, 140) + "…" : q.text).replaceAll(PLACEHOLDER, "[image]"), marks);
    }));
  const pager = el("div", {class: "pager"},
    el("button", {disabled: page === 0, onclick: () => go(params({page: page - 1, q: ""}))}, "‹ previous"),
    ` page ${page + 1} of ${pages} `,
    el("button", {disabled: page + 1 >= pages, onclick: () => go(params({page: page + 1, q: ""}))}, "next ›"));
  const side = el("aside", {class: "side"}, el("div", {}, el("label", {}, "show ", select)),
    el("div", {id: "query-count", text: indices.length + " of " + pool.queries.length + " queries"}), pager, list);
  const view = selected !== undefined && pool.queries[selected] ? renderQuery(pool, selected) : el("p", {text: "No query to show."});
  app.append(el("div", {class: "pool-layout"}, side, view));
}

function renderQuery(pool, qi) {
  const q = pool.queries[qi];
  const box = el("section", {id: "query-view", "data-query": qi});
  let imageIndex = 0;
  const queryBody = el("div", {class: "body"}, q.text.split(PLACEHOLDER).flatMap((part, k) =>
    k === 0 ? [part] : [thumb(q.images[imageIndex], null, imageIndex++), part]));
  box.append(el("div", {class: "query-box"}, el("div", {class: "head"}, "Query " + (qi + 1) +
    (q.n_tokens ? ` (${q.n_tokens} tokens)` : "")), q.instruction ? el("div", {class: "muted", text: q.instruction}) : null,
  queryBody));
  const modelsHere = R.models.filter(m => pool.results[m] && pool.results[m][qi]);
  if (modelsHere.length) {
    box.append(el("table", {id: "picks"}, el("tr", {}, ["Model", "Top-1", "Its label", "Positive's rank", "P@1"].map(h => el("th", {text: h}))),
      modelsHere.map(m => {
        const p = pool.results[m][qi];
        const pick = p[0] >= 0 ? pool.candidates[p[0]] : null;
        return el("tr", {"data-model": m}, el("td", {text: m}), el("td", {text: pick ? pick.id : "?"}),
          el("td", {class: p[1] === "positive" ? "ok" : "bad", text: p[1] || "?"}),
          el("td", {class: "num", text: p[2] === p[3] ? String(p[2]) : p[2] + "–" + p[3] + " (tied)"}),
          el("td", {class: "num", text: pct(p[4])}));
      })));
  }
  const shown = [...q.candidates];
  for (const m of modelsHere) {  // a pick made for another query is shown after the query's own candidates
    const top = pool.results[m][qi][0];
    if (top >= 0 && !shown.includes(top)) shown.push(top);
  }
  box.append(el("div", {class: "cands"}, shown.map(k => renderCandidate(pool, k, qi, modelsHere))));
  return box;
}

function fullText(pool, c) { return c.text.map(k => pool.pieces[k]).join(""); }

function renderCandidate(pool, k, qi, models) {
  const c = pool.candidates[k];
  const q = pool.queries[qi];
  const pickedBy = models.filter(m => pool.results[m][qi][0] === k);
  const own = q.candidates.includes(k);
  const card = el("div", {class: "cand", "data-role": own ? c.role : "other_query", "data-variant": c.variant, "data-id": c.id});
  card.append(el("div", {class: "head"}, el("span", {class: "badge", text: own ? c.role.replace("_", " ") : "another query's " + c.role}),
    c.variant ? el("span", {class: "badge", text: c.variant}) : null,
    pickedBy.map(m => el("span", {class: "badge pick", text: "top-1 of " + m}))));
  card.append(el("div", {class: "facts"}, `${c.id} · ${c.n_tokens} tokens (text ${c.n_text_tokens}, images ${c.n_image_tokens})` +
    ` · ${c.chars.toLocaleString()} characters · ${c.images.length} images`));
  if (c.word_stats) {
    card.append(el("details", {class: "facts"}, el("summary", {}, "word statistics (the audit's)"),
      el("table", {}, Object.entries(c.word_stats).map(([name, v]) => el("tr", {}, el("td", {text: STAT_NAMES[name] || name}),
        el("td", {class: "num", text: v}))))));
  }
  card.append(el("details", {class: "facts"}, el("summary", {}, "provenance (audit)"),
    el("pre", {text: JSON.stringify({internal_id: c.internal_id, ...c.provenance}, null, 1)})));
  if (c.realised_depth !== undefined && c.realised_depth !== null) {
    // realised_depth: the needle's first token over the candidate's tokens (0..1); depth: nominal, in percent
    const at = (100 * c.realised_depth).toFixed(2);
    card.append(el("div", {class: "depthbar", title: `needle at ${at}% (nominal ${c.depth}%)`},
      el("div", {class: "needle-marker", "data-depth": c.realised_depth, style: `left: ${at}%`})),
    el("div", {class: "facts", text: `needle at realised depth ${at}% of the tokens (nominal ${c.depth}%)`}));
  }
  const body = el("div", {class: "body"});
  card.append(body);
  const draw = (expanded) => {
    body.replaceChildren(c.block_of_frame ? renderFrames(c) : renderText(pool, c, expanded, () => draw(true)));
  };
  draw(false);
  return card;
}

function renderFrames(c) {
  // frames in shown order, grouped into their event blocks; a block shown away from its place in
  // the video (a shuffle or reversal) is marked
  const strip = el("div", {class: "frames"});
  const order = c.provenance.order || [];
  const blocks = c.provenance.blocks || [];
  let current = null, position = -1;
  c.images.forEach((key, i) => {
    const b = c.block_of_frame[i];
    if (!current || current.block !== b) {
      position += 1;
      const moved = order.length ? order.indexOf(b) !== b : false;
      const event = blocks[b] ? `event ${blocks[b].event_index} (${blocks[b].start}–${blocks[b].end} s)` : `block ${b}`;
      current = {block: b, node: el("div", {class: "block" + (moved ? " moved" : ""), "data-block": b,
        title: moved ? `block ${b} shown at position ${position}` : null},
      el("div", {class: "label", text: `${event}${moved ? " · moved" : ""}`}))};
      strip.append(current.node);
    }
    current.node.append(thumb(key, null, i));
  });
  return strip;
}

function windows(length, marks, expanded) {
  if (expanded || length <= 3 * WINDOW) return [[0, length]];
  const spans = marks.length ? marks.map(m => [Math.max(0, m.start - WINDOW), Math.min(length, m.end + WINDOW)])
    : [[0, Math.min(length, 2 * WINDOW)]];
  spans.sort((a, b) => a[0] - b[0]);
  const merged = [];
  for (const s of spans) {
    if (merged.length && s[0] <= merged[merged.length - 1][1]) merged[merged.length - 1][1] = Math.max(merged[merged.length - 1][1], s[1]);
    else merged.push([...s]);
  }
  return merged;
}

function snapped(text, [a, b]) {
  // a window starts and ends between words (within 40 characters), never inside one
  if (a > 0) { const k = text.slice(a, a + 40).search(/\s/); if (k >= 0) a += k + 1; }
  if (b < text.length) { const k = text.slice(Math.max(a, b - 40), b).search(/\s\S*$/); if (k >= 0) b = Math.max(a, b - 40) + k; }
  return [a, b];
}

function renderText(pool, c, expanded, expand) {
  const text = fullText(pool, c);
  const marks = [...c.marks].sort((a, b) => a.start - b.start);
  const imageMarks = {};  // one mark per image: the positive's page may be absent from several variants
  for (const m of c.image_marks) {
    const seen = imageMarks[m.index];
    imageMarks[m.index] = seen ? {...seen, label: seen.label + "; " + m.label} : m;
  }
  const out = document.createDocumentFragment();
  // the image index at a position: placeholders before it
  const placeholders = [];
  for (let at = text.indexOf(PLACEHOLDER); at >= 0; at = text.indexOf(PLACEHOLDER, at + 1)) placeholders.push(at);
  const plain = (a, b) => {
    const nodes = [];
    let at = a;
    for (let i = 0; i < placeholders.length; i++) {
      const p = placeholders[i];
      if (p < a || p >= b) continue;
      if (p > at) nodes.push(text.slice(at, p));
      nodes.push(thumb(c.images[i], imageMarks[i], i));
      at = p + PLACEHOLDER.length;
    }
    if (at < b) nodes.push(text.slice(at, b));
    return nodes;
  };
  let last = 0;
  for (const [a, b] of windows(text.length, marks, expanded).map(w => snapped(text, w))) {
    if (a > last) out.append(el("button", {class: "gap", onclick: expand}, `… ${(a - last).toLocaleString()} characters (show all)`));
    let at = a;
    for (const m of marks) {
      if (m.end <= at || m.start >= b) continue;
      const s = Math.max(m.start, at), e = Math.min(m.end, b);
      out.append(...plain(at, s), el("mark", {class: "m-" + m.kind, title: m.label, "data-kind": m.kind,
        "data-variant": m.variant || null}, ...plain(s, e)));
      at = e;
    }
    out.append(...plain(at, b));
    last = b;
  }
  if (last < text.length) out.append(el("button", {class: "gap", onclick: expand}, `… ${(text.length - last).toLocaleString()} characters (show all)`));
  return out;
}

// ---- routing ------------------------------------------------------------------------------------

// What the build or release records as synthetic (manifest.json's `synthetic`): a release's notes
// start with their component's name; a single build's concern all its pools.
function syntheticNotes(dataset) {
  const notes = R.synthetic || [];
  if (!dataset || !(R.components && R.components.length)) return notes;
  return notes.filter(note => note.startsWith(dataset + ":"));
}
function syntheticBanner(dataset) {
  const notes = syntheticNotes(dataset);
  return notes.length ? el("p", {class: "synthetic", text: "SYNTHETIC: " + notes.join("; ")}) : null;
}

function render() {
  const app = document.getElementById("app");
  const state = hashState();
  app.replaceChildren();
  document.getElementById("release-name").textContent = R.name;
  const name = state.get("pool");
  if (!name) {
    const banner = syntheticBanner(null);
    if (banner) app.append(banner);
    renderHome(app, state);
    return;
  }
  const entry = R.pools.find(p => p.pool === name);
  if (!entry) { app.append(el("p", {text: "No pool " + name + " in this release."})); return; }
  app.append(el("p", {text: "Loading " + name + "…"}));
  loadPool(entry).then(pool => {
    if (hashState().get("pool") !== name) return;
    app.replaceChildren();
    const banner = syntheticBanner(entry.dataset);
    if (banner) app.append(banner);
    renderPool(app, hashState(), entry, pool);
  }, error => { app.replaceChildren(el("p", {class: "bad", text: error.message})); });
}

function footer() {
  const s = R.size;
  document.getElementById("footer").textContent = `${R.pools.length} pools · site ${fmtBytes(s.site_bytes)} ` +
    `(${s.images} images stored once as thumbnails, ${fmtBytes(s.image_bytes)}) against the release's data files, ` +
    `${fmtBytes(s.release_bytes)}` + (R.runs.length ? ` · picks from ${R.runs.join(", ")}` : "");
}

window.addEventListener("hashchange", render);
footer();
render();
