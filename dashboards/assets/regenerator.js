/*
 * The one part of @babel/polyfill Dash's bundles still need in the browsers Dash supports: a global
 * `regeneratorRuntime` for the lazy loader of async components (dash-renderer, dcc and dash_table each compile
 * `async () => { await resolve(true); isReady = true; }` with Babel's regenerator, which calls
 * `regeneratorRuntime.mark` and `regeneratorRuntime.wrap`). The page leaves the 99 kB polyfill out
 * (dashboards/polyfill.py); this supplies that call shape: a state machine whose body reads and sets
 * `context.prev` / `context.next`, returns the value it awaits, and ends with `context.stop()`. No try/catch
 * locations, no delegation: tests/dashboards/test_polyfill.py checks that every use in the served bundles is
 * of this shape.
 */
(function () {
  "use strict";
  if (window.regeneratorRuntime) return;

  function wrap(body, outer, self) {
    const context = {
      prev: 0,
      next: 0,
      sent: undefined,
      done: false,
      stop() {
        this.done = true;
      },
    };
    let finished = false;
    return {
      next(value) {
        if (finished) return { value: undefined, done: true };
        context.sent = value;
        const result = body.call(self, context);
        finished = context.done;
        return { value: result, done: finished };
      },
      throw(error) {
        finished = true; // no catch locations: the error leaves the function, as from an async one without try
        throw error;
      },
      return(value) {
        finished = true;
        return { value: value, done: true };
      },
    };
  }

  window.regeneratorRuntime = { mark: (generator) => generator, wrap: wrap };
})();
