// fastpp's report: expands the embedded sections into Plotly figures and tables.
"use strict";
const DATA = JSON.parse(document.getElementById("fastpp-data").textContent);
const KINDS = DATA.kinds;
const CONFIG = {responsive: true, displaylogo: false, scrollZoom: true};
const HOVER = "<b>%{customdata[0]}</b><br>start %{customdata[1]}<br>end %{customdata[2]}" +
  "<br>microbatch %{customdata[3]}, stage %{customdata[4]}<extra>%{fullData.name}</extra>";

function opLabel(t, i) {
  const k = t.kind[i];
  if (k === 4) return `(${t.stage[i]}F${t.mb[i]};${t.stage2[i]}B${t.mb2[i]})OVERLAP_F_B`;
  if (k === 5) return "wait for an input";
  return `${t.stage[i]}${KINDS[k].name}${t.mb[i]}`;
}

// a timeline item's ops: inflated, then each op's start and end from its row's gaps
async function inflate(item) {
  const bytes = Uint8Array.from(atob(item.blob), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  const buffer = await new Response(stream).arrayBuffer();
  const t = Object.assign({}, item);
  const count = t.length.reduce((a, b) => a + b, 0);
  t.columns.forEach((name, c) => { t[name] = new Int32Array(buffer, 4 * c * count, count); });
  t.start = new Array(count);
  t.end = new Array(count);
  t.row = new Array(count);
  let i = 0;
  t.length.forEach((len, r) => {
    let clock = 0;
    for (let k = 0; k < len; k++, i++) {
      clock += t.gap[i];
      t.start[i] = +(clock * t.q).toPrecision(12);
      clock += t.dur[i];
      t.end[i] = +(clock * t.q).toPrecision(12);
      t.row[i] = r;
    }
  });
  if (t.after) {
    const scale = (v) => +(v * t.mq).toPrecision(12);
    t.memory = [Array.from(t.after, scale), Array.from(t.done, scale)];
  }
  return t;
}

// one horizontal bar trace per op kind, the memory curves on a second axis beneath
function timelineFigure(t, range) {
  const traces = {};
  for (let i = 0; i < t.kind.length; i++) {
    const k = t.kind[i];
    if (!traces[k]) {
      traces[k] = {type: "bar", orientation: "h", name: KINDS[k].label, base: [], x: [], y: [],
        customdata: [], width: 0.8, hovertemplate: HOVER, xaxis: "x", yaxis: "y",
        marker: {color: KINDS[k].colour, line: {width: 0.5, color: "white"}}};
    }
    const tr = traces[k];
    tr.base.push(t.start[i]);
    tr.x.push(t.end[i] - t.start[i]);
    tr.y.push(t.rows[t.row[i]]);
    tr.customdata.push([opLabel(t, i), t.start[i], t.end[i], t.mb[i], t.stage[i]]);
  }
  const data = Object.keys(traces).sort((a, b) => a - b).map((k) => traces[k]);
  const rowsPx = Math.max(120, 22 * t.rows.length);
  const memPx = t.memory ? 200 : 0;
  const height = rowsPx + memPx + 110;
  const split = t.memory ? (memPx + 30) / (rowsPx + memPx + 30) : 0;
  const layout = {title: {text: t.title, font: {size: 13}}, barmode: "overlay", height: height,
    margin: {t: 50, l: 90, r: 20, b: 45}, hovermode: "closest",
    legend: {orientation: "h", y: 1.0, yanchor: "bottom", x: 1, xanchor: "right"},
    xaxis: {title: {text: "time"}, anchor: t.memory ? "y2" : "y", range: range},
    yaxis: {type: "category", categoryorder: "array", categoryarray: t.rows,
      autorange: "reversed", domain: [split, 1]}};
  if (t.memory) {
    layout.yaxis2 = {domain: [0, memPx / (rowsPx + memPx + 30)], title: {text: "activations"},
      rangemode: "tozero"};
    const [after, done] = t.memory;
    let i = 0;
    t.length.forEach((len, r) => {
      // the step curve: 0 at time 0, then the value just after every op's start and end
      const x = [0], y = [0];
      for (let k = 0; k < len; k++, i++) {
        x.push(t.start[i], t.end[i]);
        y.push(after[i], done[i]);
      }
      data.push({type: "scatter", mode: "lines", x: x, y: y, xaxis: "x", yaxis: "y2",
        name: t.rows[r], showlegend: false, line: {shape: "hv", width: 1},
        hovertemplate: `${t.rows[r]}: %{y} at %{x}<extra>memory</extra>`});
    });
  }
  return {data: data, layout: layout};
}

// figure: a Plotly figure, or a function giving a promise of one
function newPlot(parent, figure) {
  const div = document.createElement("div");
  div.className = "fastpp-plot";
  parent.appendChild(div);
  // drawn when scrolled near: a sweep's report holds dozens of figures
  lazy(div, async () => {
    const fig = typeof figure === "function" ? await figure() : figure;
    await Plotly.newPlot(div, fig.data, fig.layout, CONFIG);
    div.dataset.rendered = "1";
  });
  return div;
}

const pending = new Map();
const observer = new IntersectionObserver((entries) => {
  for (const e of entries) {
    if (e.isIntersecting && pending.has(e.target)) {
      const draw = pending.get(e.target);
      pending.delete(e.target);
      observer.unobserve(e.target);
      draw();
    }
  }
}, {rootMargin: "300px"});

function lazy(div, draw) { pending.set(div, draw); observer.observe(div); }

function render(parent, item) {
  if (item.type === "plot") return newPlot(parent, item.figure);
  if (item.type === "timeline") {
    return newPlot(parent, async () => timelineFigure(await inflate(item), item.range));
  }
  if (item.type === "text") {
    const p = document.createElement("p");
    p.textContent = item.text;
    return parent.appendChild(p);
  }
  if (item.type === "group") return item.items.forEach((sub) => render(parent, sub));
  if (item.type === "table") return renderTable(parent, item);
  if (item.type === "choice") {
    const label = document.createElement("label");
    label.textContent = item.label + " ";
    const select = document.createElement("select");
    item.options.forEach((o, i) => select.add(new Option(o.label, i)));
    label.appendChild(select);
    parent.appendChild(label);
    const box = document.createElement("div");
    parent.appendChild(box);
    const show = () => {
      for (const old of box.querySelectorAll(".fastpp-plot")) {
        if (pending.has(old)) { pending.delete(old); observer.unobserve(old); }
        else Plotly.purge(old);
      }
      box.replaceChildren();
      render(box, item.options[select.value].item);
    };
    select.addEventListener("change", show);
    show();
  }
}

// a small sortable, filterable table: click a heading to sort, type in a box to filter
function formatter(fmt) {
  if (fmt === "%") return (v) => (v * 100).toFixed(1) + "%";
  if (fmt === ",d") return (v) => Math.round(v).toLocaleString("en-US");
  if (fmt === "d") return (v) => String(v);
  if (fmt === "bool") return (v) => (v ? "yes" : "no");
  if (fmt === "str") return (v) => String(v);
  const digits = parseInt(fmt.slice(1), 10);
  return (v) => Number(v.toPrecision(digits)).toString();
}

function matcher(text, fmt) {
  const m = text.trim().match(/^(<=|>=|<|>|=)\s*(-?[0-9.eE+]+%?)$/);
  if (m && fmt !== "str" && fmt !== "bool") {
    let x = parseFloat(m[2]);
    if (m[2].endsWith("%")) x /= 100;
    const ops = {"<": (v) => v < x, ">": (v) => v > x, "<=": (v) => v <= x, ">=": (v) => v >= x,
      "=": (v) => v === x};
    return (v, shown) => v !== null && ops[m[1]](v);
  }
  const needle = text.trim().toLowerCase();
  return (v, shown) => shown.toLowerCase().includes(needle);
}

function renderTable(parent, item) {
  const LIMIT = 500;
  const cols = item.columns;
  const fmts = cols.map((c) => formatter(c.format));
  const shown = item.rows.map((r) => r.map((v, j) => (v === null ? cols[j].missing
    : fmts[j](v))));
  const order = item.rows.map((_, i) => i);
  const filters = cols.map(() => null);
  let sortCol = -1, sortDir = 1;
  const wrap = document.createElement("div");
  wrap.className = "fastpp-table";
  const info = document.createElement("p");
  const table = document.createElement("table");
  const head = table.createTHead();
  const names = head.insertRow();
  const boxes = head.insertRow();
  const body = table.createTBody();
  cols.forEach((c, j) => {
    const th = document.createElement("th");
    th.textContent = c.name;
    th.addEventListener("click", () => {
      sortDir = sortCol === j ? -sortDir : (c.format === "str" ? 1 : -1);
      sortCol = j;
      order.sort((a, b) => {
        const x = item.rows[a][j], y = item.rows[b][j];
        if (x === y) return a - b;
        if (x === null) return 1;
        if (y === null) return -1;
        return (x < y ? -1 : 1) * sortDir;
      });
      for (const h of names.cells) h.classList.remove("asc", "desc");
      th.classList.add(sortDir > 0 ? "asc" : "desc");
      draw();
    });
    names.appendChild(th);
    const cell = document.createElement("th");
    const input = document.createElement("input");
    input.placeholder = c.format === "str" || c.format === "bool" ? "filter" : "e.g. >1";
    input.addEventListener("input", () => {
      filters[j] = input.value.trim() ? matcher(input.value, c.format) : null;
      draw();
    });
    cell.appendChild(input);
    boxes.appendChild(cell);
  });
  function draw() {
    const rows = order.filter((i) => filters.every((f, j) => !f || f(item.rows[i][j],
      shown[i][j])));
    const html = rows.slice(0, LIMIT).map((i) => "<tr>" + shown[i].map((s) =>
      `<td>${s.replace(/&/g, "&amp;").replace(/</g, "&lt;")}</td>`).join("") + "</tr>");
    body.innerHTML = html.join("");
    info.textContent = `${rows.length.toLocaleString("en-US")} of ` +
      `${item.rows.length.toLocaleString("en-US")} rows` +
      (rows.length > LIMIT ? ` (the first ${LIMIT} shown)` : "");
  }
  wrap.appendChild(info);
  wrap.appendChild(table);
  parent.appendChild(wrap);
  draw();
}

const main = document.getElementById("fastpp-main");
const nav = document.getElementById("fastpp-nav");
DATA.sections.forEach((s, i) => {
  const section = document.createElement("section");
  section.id = `section-${i}`;
  const h = document.createElement("h2");
  h.textContent = s.title;
  section.appendChild(h);
  if (s.text) {
    const p = document.createElement("p");
    p.textContent = s.text;
    section.appendChild(p);
  }
  s.items.forEach((item) => render(section, item));
  main.appendChild(section);
  const a = document.createElement("a");
  a.href = `#section-${i}`;
  a.textContent = s.title;
  nav.appendChild(a);
});
