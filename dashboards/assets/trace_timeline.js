/*
 * Hotspan's trace timeline: the span tree and its timeline, virtualised, drawn on canvas.
 *
 * The server keeps the trace's model (query/trace_model.py) and sends windows of the rows a reader can see
 * (query/trace_rows.py): compact column arrays, times in ns after the trace's start. This file draws only the
 * rows in view, asks for another window when the reader scrolls past the one it has, and turns clicks into
 * requests: a row's triangle collapses or expands its subtree (or opens an aggregate of repeated siblings),
 * anywhere else on the row opens the span's detail. The minimap above shows the whole trace (its stage lane
 * and its rows in bands); dragging on it chooses the time window the timeline shows.
 *
 * Dash wiring (dashboards/pages/trace.py): the clientside callback hotspan.renderTrace gets the page's meta
 * (services, stages, minimap, first window) and each later window; the widget writes its requests into the
 * "trace-request" store and selections into "trace-selected" with dash_clientside.set_props, and asks for the flame
 * graph ("trace-flame-wanted") once its box comes near the viewport. No build step.
 */
(function () {
  "use strict";

  const ROW = 22;
  const MINIMAP_HEIGHT = 64;
  const AXIS_HEIGHT = 44;
  const LABEL_FRACTION = 0.34;
  const OVERSCAN = 150;
  const FETCH_ROWS = 420;
  const INDENT = 12;
  const MAX_INDENT_LEVELS = 28;
  const MAX_SCROLL_PX = 30000000;
  const FLAG = { ERROR: 1, CRITICAL: 2, PARENT: 4, COLLAPSED: 8, AGGREGATE: 16, ADJUSTED: 32, BROKEN: 64, MATCH: 128 };
  const FONT = "12px Inter, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif";
  const SMALL_FONT = "10px Inter, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif";
  const NEAR_PX = 200;
  const CRITICAL_COLOR = "#111827";
  const ERROR_COLOR = "#d62728";

  const formatDuration = (ns) => window.hotspanFormat.duration(ns);

  function niceStep(span, target) {
    const raw = span / Math.max(target, 1);
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const factor of [1, 2, 5, 10]) if (factor * power >= raw) return factor * power;
    return 10 * power;
  }

  function el(tag, attributes, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes || {})) {
      if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children || []) node.appendChild(child);
    return node;
  }

  function hatch(ctx) {
    const tile = document.createElement("canvas");
    tile.width = tile.height = 6;
    const t = tile.getContext("2d");
    t.fillStyle = "rgba(255,255,255,0.6)";
    t.fillRect(0, 0, 6, 6);
    t.strokeStyle = "rgba(55,65,81,0.55)";
    t.lineWidth = 1;
    t.beginPath();
    t.moveTo(-1, 7);
    t.lineTo(7, -1);
    t.stroke();
    return ctx.createPattern(tile, "repeat");
  }

  function setProps(id, data) {
    if (window.dash_clientside && window.dash_clientside.set_props) window.dash_clientside.set_props(id, { data: data });
  }

  class Timeline {
    constructor(root) {
      this.root = root;
      this.seq = 0;
      this.meta = null;
      this.win = null;
      this.lane = null;
      this.selected = null;
      this.matchIndex = -1;
      this.pendingFetch = null;
      this.build();
      root.hsTimeline = this;
    }

    build() {
      const root = this.root;
      root.innerHTML = "";
      this.search = el("input", { id: "trace-search", type: "search", class: "hs-tl-search", placeholder: "Find in trace: name, service, attribute, span ID  (key=value)" });
      this.searchCount = el("span", { id: "trace-search-count", class: "hs-hint" });
      this.prev = el("button", { id: "trace-search-prev", class: "hs-button hs-tl-small", title: "Previous match", text: "▲" });
      this.next = el("button", { id: "trace-search-next", class: "hs-button hs-tl-small", title: "Next match", text: "▼" });
      this.expandAll = el("button", { id: "trace-expand-all", class: "hs-button", text: "Expand all" });
      this.depthInput = el("input", { id: "trace-depth", type: "number", min: "0", value: "2", class: "hs-tl-depth", title: "depth" });
      this.collapseDepth = el("button", { id: "trace-collapse-depth", class: "hs-button", text: "Collapse below depth" });
      this.critical = el("button", { id: "trace-expand-critical", class: "hs-button", text: "Expand the critical path" });
      this.aggregate = el("input", { id: "trace-aggregate", type: "checkbox" });
      this.aggregateLabel = el("label", { class: "hs-tl-check", title: "Siblings repeating one service and name shown as one row with their count" }, [this.aggregate, document.createTextNode(" group repeated siblings")]);
      this.resetZoom = el("button", { id: "trace-reset-zoom", class: "hs-button", text: "Reset zoom" });
      this.shownCount = el("span", { id: "trace-shown", class: "hs-hint hs-tl-shown" });
      const toolbar = el("div", { class: "hs-tl-toolbar" }, [
        this.search, this.searchCount, this.prev, this.next, el("span", { class: "hs-tl-sep" }),
        this.expandAll, this.collapseDepth, this.depthInput, this.critical, this.aggregateLabel, this.resetZoom, this.shownCount,
      ]);
      this.minimap = el("canvas", { id: "trace-minimap", class: "hs-tl-minimap" });
      this.axis = el("canvas", { id: "trace-axis", class: "hs-tl-axis" });
      this.canvas = el("canvas", { id: "trace-canvas", class: "hs-tl-canvas" });
      this.spacer = el("div", { class: "hs-tl-spacer" });
      this.scroller = el("div", { id: "trace-scroll", class: "hs-tl-scroll" }, [this.canvas, this.spacer]);
      this.tooltip = el("div", { id: "trace-tooltip", class: "hs-tl-tooltip" });
      root.append(toolbar, this.minimap, this.axis, this.scroller, this.tooltip);

      this.search.addEventListener("keydown", (event) => { if (event.key === "Enter") this.runSearch(); });
      this.search.addEventListener("search", () => this.runSearch());
      this.prev.addEventListener("click", () => this.stepMatch(-1));
      this.next.addEventListener("click", () => this.stepMatch(1));
      this.expandAll.addEventListener("click", () => this.setMode("all"));
      this.collapseDepth.addEventListener("click", () => this.setMode("depth"));
      this.critical.addEventListener("click", () => this.setMode("critical"));
      this.aggregate.addEventListener("change", () => { this.expansion.aggregate = this.aggregate.checked; this.expansion.opened = []; this.fetch(0, true); });
      this.resetZoom.addEventListener("click", () => this.setZoom(0, this.meta.duration));
      this.scroller.addEventListener("scroll", () => this.onScroll());
      this.canvas.addEventListener("click", (event) => this.onClick(event));
      this.canvas.addEventListener("mousemove", (event) => this.onHover(event));
      this.canvas.addEventListener("mouseleave", () => { this.hoverRow = null; this.tooltip.style.display = "none"; this.draw(); });
      this.bindMinimap();
      this.observer = new ResizeObserver(() => { this.layout(); this.drawAll(); });
      this.observer.observe(root);
    }

    setMeta(meta) {
      this.meta = meta;
      this.expansion = Object.assign({ mode: "all", depth: 2, toggled: [], aggregate: true, opened: [], search: "" }, meta.expansion || {});
      this.aggregate.checked = !!this.expansion.aggregate;
      this.aggregateLabel.style.display = meta.aggregatable ? "" : "none";
      this.depthInput.value = String(this.expansion.depth);
      this.zoom = [0, meta.duration];
      this.wholeLane = meta.lane;
      this.lane = meta.lane;
      this.laneRange = [0, meta.duration];
      this.selected = null;
      this.layout();
      this.setWindow(meta.rows, 0);
      this.drawMinimap();
      this.root.dataset.ready = "1";
      this.fillAfterPaint();
    }

    // The page's starting data holds only the first screenful of rows (dashboards/trace_panels.py,
    // FIRST_WINDOW_ROWS), so that the first paint comes sooner; once it is on screen, ask for a full window around
    // the rows in view, unless the reader asked for something else meanwhile (a newer request wins).
    fillAfterPaint() {
      const win = this.win;
      const seq = this.seq;
      if (win.offset === 0 && win.rows.span.length >= this.total) return;
      window.requestAnimationFrame(() => setTimeout(() => {
        if (this.win === win && this.seq === seq) this.fetch(Math.floor(this.topPx() / ROW) - OVERSCAN, false);
      }, 0));
    }

    setRows(payload) {
      if (!payload || payload.seq !== this.seq || !this.meta || payload.trace_id !== this.meta.trace_id) return;
      if (payload.lane) { this.lane = payload.lane; this.laneRange = payload.lane_range; }
      if (payload.rows) this.setWindow(payload.rows, payload.scroll_to);
      else this.drawAll();
    }

    setWindow(win, scrollTo) {
      this.win = win;
      const n = win.rows.span.length;
      const per = (key) => { const lists = Array.from({ length: n }, () => []); const part = win[key]; for (let i = 0; i < part.row.length; i++) lists[part.row[i]].push(i); return lists; };
      this.piecesOf = per("pieces");
      this.criticalOf = per("critical");
      this.gapsOf = per("gaps");
      this.densityOf = new Map(win.density.row.map((row, i) => [row, win.density.bins[i]]));
      const resized = this.total !== win.total;
      this.total = win.total;
      if (resized) this.layout();
      const matches = win.matches;
      this.matchIndex = Math.max(this.matchIndex, 0);
      this.searchCount.textContent = !this.expansion.search ? "" : matches.count ? `${this.matchIndex + 1} of ${matches.count.toLocaleString()} match${matches.count === 1 ? "" : "es"}` : "no match";
      this.shownCount.textContent = `${this.total.toLocaleString()} rows shown of ${this.meta.span_count.toLocaleString()} spans`;
      this.resizeSpacer();
      if (typeof scrollTo === "number" && scrollTo >= 0) this.scrollToRow(scrollTo);
      this.root.dataset.total = String(this.total);
      this.drawAll();
    }

    // --- geometry ---------------------------------------------------------------------------------------
    layout() {
      const width = Math.max(this.root.clientWidth, 300);
      this.width = width;
      this.labelWidth = Math.round(width * LABEL_FRACTION);
      this.barX = this.labelWidth + 8;
      this.barWidth = Math.max(width - this.barX - 70, 50);
      const tallest = Math.max(Math.min(window.innerHeight - 260, 720), 260);
      this.viewHeight = this.total === undefined ? tallest : Math.min(tallest, Math.max(this.total, 4) * ROW);
      this.scroller.style.height = this.viewHeight + "px";
      this.sizeCanvas(this.canvas, width, this.viewHeight);
      this.sizeCanvas(this.minimap, width, MINIMAP_HEIGHT);
      this.sizeCanvas(this.axis, width, AXIS_HEIGHT);
      this.resizeSpacer();
    }

    sizeCanvas(canvas, width, height) {
      const ratio = window.devicePixelRatio || 1;
      canvas.style.width = width + "px";
      canvas.style.height = height + "px";
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(height * ratio);
      canvas.getContext("2d").setTransform(ratio, 0, 0, ratio, 0, 0);
    }

    resizeSpacer() {
      if (this.total === undefined) return;
      const virtual = this.total * ROW;
      this.scrollScale = virtual > MAX_SCROLL_PX ? MAX_SCROLL_PX / virtual : 1;
      this.spacer.style.height = Math.max(virtual * this.scrollScale - this.viewHeight, 0) + "px";
    }

    topPx() { return this.scroller.scrollTop / this.scrollScale; }

    scrollToRow(position) {
      this.scroller.scrollTop = Math.max(position * ROW - this.viewHeight / 3, 0) * this.scrollScale;
    }

    x(ns) { return this.barX + ((ns - this.zoom[0]) / Math.max(this.zoom[1] - this.zoom[0], 1)) * this.barWidth; }

    // --- requests ---------------------------------------------------------------------------------------
    fetch(offset, reset, scrollTo) {
      this.seq += 1;
      if (reset) this.scroller.scrollTop = 0;
      setProps("trace-request", {
        trace_id: this.meta.trace_id,
        seq: this.seq,
        expansion: this.expansion,
        offset: Math.max(0, offset),
        limit: FETCH_ROWS,
        lane: this.zoom,
        scroll_to_match: scrollTo === "match",
        scroll_to_span: typeof scrollTo === "number" ? scrollTo : null,
      });
    }

    fetchLane() {
      this.seq += 1;
      setProps("trace-request", { trace_id: this.meta.trace_id, seq: this.seq, lane: this.zoom, lane_only: true });
    }

    setMode(mode) {
      this.expansion.mode = mode;
      this.expansion.depth = Math.max(0, parseInt(this.depthInput.value || "2", 10) || 0);
      this.expansion.toggled = [];
      this.expansion.opened = [];
      this.fetch(0, true);
    }

    runSearch() {
      this.expansion.search = this.search.value.trim();
      this.matchIndex = 0;
      this.fetch(0, true, "match");
    }

    stepMatch(step) {
      if (!this.win || !this.win.matches.count) return;
      const positions = this.win.matches.positions;
      if (!positions.length) return;
      this.matchIndex = (this.matchIndex + step + positions.length) % positions.length;
      const position = positions[this.matchIndex];
      this.searchCount.textContent = `${this.matchIndex + 1} of ${this.win.matches.count.toLocaleString()} matches`;
      this.scrollToRow(position);
      this.onScroll();
    }

    toggle(i) {
      const rows = this.win.rows;
      const span = rows.span[i];
      const flip = (list) => { const at = list.indexOf(span); if (at >= 0) list.splice(at, 1); else list.push(span); };
      flip(rows.flags[i] & FLAG.AGGREGATE ? this.expansion.opened : this.expansion.toggled);
      this.fetch(Math.max(0, this.win.offset + i - OVERSCAN), false);
    }

    setZoom(start, end) {
      const duration = this.meta.duration;
      start = Math.max(0, Math.min(start, duration));
      end = Math.max(start + Math.max(duration / 1e6, 1), Math.min(end, duration));
      this.zoom = [start, end];
      this.drawAll();
      clearTimeout(this.laneTimer);
      this.laneTimer = setTimeout(() => this.fetchLane(), 120);
    }

    // --- events -----------------------------------------------------------------------------------------
    onScroll() {
      window.requestAnimationFrame(() => this.draw());
      if (!this.win) return;
      const first = Math.floor(this.topPx() / ROW);
      const last = first + Math.ceil(this.viewHeight / ROW);
      const have = [this.win.offset, this.win.offset + this.win.rows.span.length];
      const need = [first, Math.min(last, this.total)];
      if (need[0] >= have[0] && need[1] <= have[1]) return;
      clearTimeout(this.pendingFetch);
      this.pendingFetch = setTimeout(() => this.fetch(first - OVERSCAN, false), 40);
    }

    rowAt(event) {
      const box = this.canvas.getBoundingClientRect();
      const y = event.clientY - box.top;
      const position = Math.floor((this.topPx() + y) / ROW);
      const i = position - (this.win ? this.win.offset : 0);
      return { position, i, x: event.clientX - box.left, valid: this.win && i >= 0 && i < this.win.rows.span.length };
    }

    onClick(event) {
      const hit = this.rowAt(event);
      if (!hit.valid) return;
      const rows = this.win.rows;
      const indent = Math.min(rows.depth[hit.i], MAX_INDENT_LEVELS) * INDENT + 4;
      if ((rows.flags[hit.i] & FLAG.PARENT) && hit.x >= indent - 4 && hit.x <= indent + 14) {
        this.toggle(hit.i);
        return;
      }
      this.selected = rows.span[hit.i];
      this.draw();
      setProps("trace-selected", { span: this.selected, aggregate: !!(rows.flags[hit.i] & FLAG.AGGREGATE), seq: Date.now() });
    }

    onHover(event) {
      const hit = this.rowAt(event);
      this.hoverRow = hit.valid ? hit.position : null;
      this.draw();
      if (!hit.valid) { this.tooltip.style.display = "none"; return; }
      const rows = this.win.rows;
      const i = hit.i;
      const service = this.meta.services[rows.service[i]];
      const stage = this.meta.stages[rows.stage[i]];
      const lines = [
        `<b>${escapeHtml(rows.name[i])}</b>${rows.count[i] > 1 ? ` ×${rows.count[i].toLocaleString()}` : ""}`,
        `${escapeHtml(service.name)} · ${rows.count[i] > 1 ? "summed " : ""}${formatDuration(rows.duration[i])}`,
        rows.count[i] > 1 ? `from +${formatDuration(rows.start[i])} to +${formatDuration(rows.end[i])}` : `starts at +${formatDuration(rows.start[i])} · untraced ${formatDuration(rows.self[i])}`,
        `stage: ${escapeHtml(stage.label)}${rows.flags[i] & FLAG.CRITICAL ? " · on the critical path" : ""}`,
      ];
      if (rows.flags[i] & FLAG.ERROR) lines.push('<span class="hs-tl-error">error</span>');
      if (rows.flags[i] & FLAG.ADJUSTED) lines.push("moved by an adjuster for the analysis (see details)");
      if (rows.flags[i] & FLAG.BROKEN) lines.push("shown as a root: its parent link is broken");
      lines.push('<span class="hs-hint">click for details</span>');
      this.tooltip.innerHTML = lines.join("<br>");
      const box = this.root.getBoundingClientRect();
      const canvasBox = this.canvas.getBoundingClientRect();
      this.tooltip.style.display = "block";
      this.tooltip.style.left = Math.min(event.clientX - box.left + 14, box.width - 320) + "px";
      this.tooltip.style.top = (canvasBox.top - box.top + (hit.position * ROW - this.topPx()) + ROW + 4) + "px";
    }

    bindMinimap() {
      let drag = null;
      const toNs = (event) => {
        const box = this.minimap.getBoundingClientRect();
        const fraction = (event.clientX - box.left - this.barX) / this.barWidth;
        return Math.max(0, Math.min(1, fraction)) * this.meta.duration;
      };
      this.minimap.addEventListener("mousedown", (event) => {
        if (!this.meta) return;
        const at = toNs(event);
        const inside = at > this.zoom[0] && at < this.zoom[1] && this.zoom[1] - this.zoom[0] < this.meta.duration;
        drag = inside ? { kind: "pan", from: at, zoom: this.zoom.slice() } : { kind: "select", from: at };
        event.preventDefault();
      });
      window.addEventListener("mousemove", (event) => {
        if (!drag) return;
        const at = toNs(event);
        if (drag.kind === "pan") {
          const width = drag.zoom[1] - drag.zoom[0];
          let start = drag.zoom[0] + (at - drag.from);
          start = Math.max(0, Math.min(start, this.meta.duration - width));
          this.zoom = [start, start + width];
        } else {
          this.zoom = [Math.min(drag.from, at), Math.max(drag.from, at, Math.min(drag.from, at) + 1)];
        }
        this.drawAll();
      });
      window.addEventListener("mouseup", () => {
        if (!drag) return;
        if (drag.kind === "select" && this.zoom[1] - this.zoom[0] < this.meta.duration / 500) this.zoom = [0, this.meta.duration];
        drag = null;
        this.setZoom(this.zoom[0], this.zoom[1]);
      });
      this.minimap.addEventListener("dblclick", () => this.setZoom(0, this.meta.duration));
    }

    // --- drawing ----------------------------------------------------------------------------------------
    drawAll() {
      if (!this.meta) return;
      this.drawMinimap();
      this.drawAxis();
      this.draw();
    }

    drawLane(ctx, lane, y, height, toX) {
      // Stage -1: critical-path time outside its span's own interval, untraced: hatched.
      if (!this.hatchPattern) this.hatchPattern = hatch(ctx);
      for (let k = 0; k < lane.stage.length; k++) {
        const x0 = toX(lane.start[k]);
        const x1 = toX(lane.end[k]);
        ctx.fillStyle = lane.stage[k] < 0 ? this.hatchPattern : this.meta.stages[lane.stage[k]].color;
        ctx.fillRect(x0, y, Math.max(x1 - x0, 1), height);
      }
    }

    drawMinimap() {
      if (!this.meta) return;
      const ctx = this.minimap.getContext("2d");
      const meta = this.meta;
      ctx.clearRect(0, 0, this.width, MINIMAP_HEIGHT);
      ctx.fillStyle = "#f8f9fb";
      ctx.fillRect(this.barX, 0, this.barWidth, MINIMAP_HEIGHT);
      const whole = (ns) => this.barX + (ns / Math.max(meta.duration, 1)) * this.barWidth;
      ctx.font = SMALL_FONT;
      ctx.fillStyle = "#6b7280";
      ctx.fillText("stages", this.labelWidth - 40, 10);
      ctx.fillText("whole trace · drag to zoom, double-click to reset", 4, 10);
      ctx.fillText(`0 … ${formatDuration(meta.duration)}`, 4, 26);
      this.drawLane(ctx, this.wholeLane, 2, 10, whole);
      const bands = meta.minimap;
      const top = 16;
      const height = MINIMAP_HEIGHT - top - 2;
      const step = height / Math.max(bands.start.length, 1);
      for (let b = 0; b < bands.start.length; b++) {
        ctx.fillStyle = meta.services[bands.service[b]].color;
        const x0 = whole(bands.start[b]);
        ctx.fillRect(x0, top + b * step, Math.max(whole(bands.end[b]) - x0, 1), Math.max(step, 1));
      }
      const z0 = whole(this.zoom[0]);
      const z1 = whole(this.zoom[1]);
      ctx.fillStyle = "rgba(31,35,40,0.18)";
      ctx.fillRect(this.barX, 0, z0 - this.barX, MINIMAP_HEIGHT);
      ctx.fillRect(z1, 0, this.barX + this.barWidth - z1, MINIMAP_HEIGHT);
      ctx.strokeStyle = "#3b5f86";
      ctx.lineWidth = 1.5;
      ctx.strokeRect(z0, 0.75, Math.max(z1 - z0, 1), MINIMAP_HEIGHT - 1.5);
    }

    drawAxis() {
      const ctx = this.axis.getContext("2d");
      ctx.clearRect(0, 0, this.width, AXIS_HEIGHT);
      ctx.fillStyle = "#f8f9fb";
      ctx.fillRect(0, 0, this.width, AXIS_HEIGHT);
      const [start, end] = this.zoom;
      const step = niceStep(end - start, this.barWidth / 110);
      ctx.font = SMALL_FONT;
      ctx.strokeStyle = "#d5d9e0";
      ctx.fillStyle = "#4b5563";
      for (let t = Math.ceil(start / step) * step; t <= end; t += step) {
        const x = this.x(t);
        ctx.beginPath();
        ctx.moveTo(x, 14);
        ctx.lineTo(x, 20);
        ctx.stroke();
        ctx.fillText(formatDuration(t), x + 2, 11);
      }
      ctx.fillStyle = "#374151";
      ctx.font = "600 " + SMALL_FONT;
      ctx.fillText("Service · operation", 6, 16);
      ctx.fillText("Stages in this window", 6, 36);
      if (this.lane) {
        ctx.save();
        ctx.beginPath();
        ctx.rect(this.barX, 24, this.barWidth, 14);
        ctx.clip();
        this.drawLane(ctx, this.lane, 26, 12, (ns) => this.x(ns));
        ctx.restore();
      }
    }

    draw() {
      if (!this.meta || !this.win) return;
      const ctx = this.canvas.getContext("2d");
      if (!this.hatchPattern) this.hatchPattern = hatch(ctx);
      const top = this.topPx();
      const first = Math.floor(top / ROW);
      const last = Math.min(first + Math.ceil(this.viewHeight / ROW) + 1, this.total);
      ctx.clearRect(0, 0, this.width, this.viewHeight);
      let drawn = 0;
      for (let position = first; position < last; position++) {
        const y = position * ROW - top;
        const i = position - this.win.offset;
        if (position % 2 === 1) { ctx.fillStyle = "#fafbfc"; ctx.fillRect(0, y, this.width, ROW); }
        if (i < 0 || i >= this.win.rows.span.length) {
          ctx.fillStyle = "#9aa1ad";
          ctx.font = SMALL_FONT;
          ctx.fillText("…", 8, y + 15);
          continue;
        }
        this.drawRow(ctx, i, position, y);
        drawn += 1;
      }
      ctx.strokeStyle = "#e1e4ea";
      ctx.beginPath();
      ctx.moveTo(this.labelWidth + 0.5, 0);
      ctx.lineTo(this.labelWidth + 0.5, this.viewHeight);
      ctx.stroke();
      this.root.dataset.drawn = String(drawn);
      this.root.dataset.first = String(first);
    }

    drawRow(ctx, i, position, y) {
      const rows = this.win.rows;
      const flags = rows.flags[i];
      const meta = this.meta;
      const color = meta.services[rows.service[i]].color;
      if (flags & FLAG.MATCH) { ctx.fillStyle = "#fff3bf"; ctx.fillRect(0, y, this.width, ROW); }
      if (rows.span[i] === this.selected) { ctx.fillStyle = "#dbe7f5"; ctx.fillRect(0, y, this.width, ROW); }
      else if (position === this.hoverRow) { ctx.fillStyle = "#eef3f9"; ctx.fillRect(0, y, this.width, ROW); }

      // Label column.
      ctx.save();
      ctx.beginPath();
      ctx.rect(0, y, this.labelWidth - 4, ROW);
      ctx.clip();
      const depth = rows.depth[i];
      let x = Math.min(depth, MAX_INDENT_LEVELS) * INDENT + 4;
      ctx.font = SMALL_FONT;
      if (depth > MAX_INDENT_LEVELS) { ctx.fillStyle = "#6b7280"; ctx.fillText(`[${depth}]`, x - 24, y + 15); }
      if (flags & FLAG.PARENT) {
        ctx.fillStyle = "#4b5563";
        ctx.font = FONT;
        ctx.fillText(flags & (FLAG.COLLAPSED | FLAG.AGGREGATE) ? "▸" : "▾", x, y + 15);
      }
      x += 14;
      ctx.fillStyle = color;
      ctx.fillRect(x, y + 7, 8, 8);
      x += 12;
      ctx.font = FONT;
      if (flags & FLAG.AGGREGATE) {
        ctx.fillStyle = "#1f2328";
        ctx.font = "600 " + FONT;
        const count = `×${rows.count[i].toLocaleString()}`;
        ctx.fillText(count, x, y + 15);
        x += ctx.measureText(count).width + 6;
        ctx.font = FONT;
      }
      const service = meta.services[rows.service[i]].name;
      ctx.fillStyle = "#6b7280";
      ctx.fillText(service, x, y + 15);
      x += ctx.measureText(service).width + 6;
      ctx.fillStyle = flags & FLAG.ERROR ? ERROR_COLOR : "#1f2328";
      ctx.fillText(rows.name[i], x, y + 15);
      x += ctx.measureText(rows.name[i]).width + 6;
      ctx.font = SMALL_FONT;
      if (rows.hidden[i] > 0) { ctx.fillStyle = "#6b7280"; const text = `+${rows.hidden[i].toLocaleString()} hidden`; ctx.fillText(text, x, y + 15); x += ctx.measureText(text).width + 6; }
      if (flags & FLAG.ADJUSTED) { ctx.fillStyle = "#3b5f86"; ctx.fillText("↺ adjusted", x, y + 15); x += 60; }
      if (flags & FLAG.BROKEN) { ctx.fillStyle = "#b45309"; ctx.fillText("⚠ broken parent link", x, y + 15); }
      ctx.restore();

      // Bar column.
      ctx.save();
      ctx.beginPath();
      ctx.rect(this.barX - 2, y, this.barWidth + 70, ROW);
      ctx.clip();
      const x0 = this.x(rows.start[i]);
      const x1 = Math.max(this.x(rows.end[i]), x0 + 2);
      const barTop = y + 4;
      const barHeight = 12;
      if (flags & FLAG.AGGREGATE) {
        ctx.globalAlpha = 0.22;
        ctx.fillStyle = color;
        ctx.fillRect(x0, barTop, x1 - x0, barHeight);
        const bins = this.densityOf.get(i) || [];
        const width = (x1 - x0) / Math.max(bins.length, 1);
        for (let b = 0; b < bins.length; b++) {
          ctx.globalAlpha = 0.15 + 0.85 * bins[b];
          ctx.fillRect(x0 + b * width, barTop, Math.max(width, 0.5), barHeight);
        }
        ctx.globalAlpha = 1;
      } else {
        ctx.fillStyle = color;
        ctx.fillRect(x0, barTop, x1 - x0, barHeight);
        const win = this.win;
        for (const k of this.piecesOf[i]) {
          const p0 = this.x(win.pieces.start[k]);
          const p1 = this.x(win.pieces.end[k]);
          ctx.fillStyle = meta.stages[win.pieces.stage[k]].color;
          ctx.fillRect(p0, barTop, Math.max(p1 - p0, 0.5), barHeight);
        }
        ctx.fillStyle = this.hatchPattern;
        for (const k of this.gapsOf[i]) {
          const g0 = this.x(win.gaps.start[k]);
          const g1 = this.x(win.gaps.end[k]);
          if (g1 - g0 >= 1) ctx.fillRect(g0, barTop, g1 - g0, barHeight);
        }
        ctx.fillStyle = CRITICAL_COLOR;
        for (const k of this.criticalOf[i]) {
          const c0 = this.x(win.critical.start[k]);
          const c1 = this.x(win.critical.end[k]);
          ctx.fillRect(c0, barTop + barHeight + 1, Math.max(c1 - c0, 1), 3);
        }
      }
      if (flags & FLAG.ERROR) { ctx.strokeStyle = ERROR_COLOR; ctx.lineWidth = 1.5; ctx.strokeRect(x0, barTop, x1 - x0, barHeight); }
      ctx.font = SMALL_FONT;
      ctx.fillStyle = "#4b5563";
      const label = formatDuration(rows.count[i] > 1 ? rows.end[i] - rows.start[i] : rows.duration[i]);
      const textWidth = ctx.measureText(label).width;
      const right = Math.min(x1, this.barX + this.barWidth);
      const textX = right + 4 + textWidth < this.barX + this.barWidth + 66 ? right + 4 : Math.max(x0 - textWidth - 4, this.barX);
      ctx.fillText(label, textX, y + 14);
      ctx.restore();
    }

    visibleRows() {
      if (!this.win) return [];
      const top = this.topPx();
      const first = Math.floor(top / ROW);
      const last = Math.min(first + Math.ceil(this.viewHeight / ROW), this.total);
      const out = [];
      const rows = this.win.rows;
      for (let position = first; position < last; position++) {
        const i = position - this.win.offset;
        if (i < 0 || i >= rows.span.length) continue;
        out.push({ position, span: rows.span[i], name: rows.name[i], depth: rows.depth[i], count: rows.count[i], flags: rows.flags[i], hidden: rows.hidden[i], y: position * ROW - top + ROW / 2 });
      }
      return out;
    }
  }

  // Calls `then` once `element` is within NEAR_PX of the viewport (at once if it already is): the flame graph
  // below the timeline loads Plotly's 4.8 MB script only for a reader who scrolls towards it.
  function whenNear(element, then) {
    if (!element) return;
    const observer = new IntersectionObserver((entries) => {
      if (!entries.some((entry) => entry.isIntersecting)) return;
      observer.disconnect();
      then();
    }, { rootMargin: NEAR_PX + "px" });
    observer.observe(element);
  }

  function escapeHtml(text) {
    return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  }

  window.dash_clientside = Object.assign({}, window.dash_clientside, {
    hotspan: Object.assign({}, (window.dash_clientside || {}).hotspan, {
      renderTrace: function (meta, rows) {
        const root = document.getElementById("trace-timeline");
        if (!root) return window.dash_clientside.no_update;
        if (!meta) { root.innerHTML = ""; delete root.hsTimeline; return 0; }
        const widget = root.hsTimeline || new Timeline(root);
        if (!widget.meta || widget.meta.load_id !== meta.load_id) {
          widget.setMeta(meta);
          whenNear(document.getElementById("trace-flame-box"), () => setProps("trace-flame-wanted", meta.load_id));
          return meta.load_id; // first paint done: the page's slower parts (request facts) load now
        }
        if (rows && rows.seq !== widget.lastSeq) { widget.lastSeq = rows.seq; widget.setRows(rows); }
        return window.dash_clientside.no_update;
      },
    }),
  });
})();
