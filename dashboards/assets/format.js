/*
 * Text for people in the browser: durations and token counts with their units, the same rules as
 * dashboards/format.py on the server. Shared by the trace timeline (trace_timeline.js, loaded after this file:
 * Dash loads assets in name order) and the AG Grid value formatters of the search results.
 */
(function () {
  "use strict";

  function duration(ns) {
    const value = Number(ns);
    if (!isFinite(value)) return "";
    if (value < 1e3) return value.toFixed(0) + " ns";
    if (value < 1e6) return value < 1e5 ? (value / 1e3).toFixed(1) + " µs" : (value / 1e3).toFixed(0) + " µs";
    if (value < 1e9) return (value / 1e6).toFixed(2) + " ms";
    if (value < 6e10) return (value / 1e9).toFixed(2) + " s";
    return (value / 6e10).toFixed(1) + " min";
  }

  function tokens(count) {
    if (count === null || count === undefined || count === "") return "";
    return Number(count).toLocaleString("en-US") + (Number(count) === 1 ? " token" : " tokens");
  }

  window.hotspanFormat = { duration: duration, tokens: tokens };
  const grid = (window.dashAgGridFunctions = window.dashAgGridFunctions || {});
  grid.hsDuration = (ns) => (ns === null || ns === undefined ? "" : duration(ns));
  // A bare count for a column whose header names the unit ("Tokens in"): "1,234".
  grid.hsCount = (count) => (count === null || count === undefined || count === "" ? "" : Number(count).toLocaleString("en-US"));
})();
