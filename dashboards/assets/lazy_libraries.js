/*
 * Component libraries loaded on first use (dashboards/lazy_libraries.py): Dash leaves their bundles out of the
 * page, and this file stands in for their components. Dash's renderer finds a component as
 * window[namespace][type]; each one here is a React component that loads its library's scripts (once, in order)
 * the first time it is drawn and then draws the library's own component with the same props, as dcc.Graph
 * does with Plotly. The library's script would replace window[namespace] with its own object: the stand-ins are
 * put back (so a drawn component's type never changes under React, which would remount it), with the library's
 * other exports (such as dash_ag_grid.getApi) and the components' static fields Dash reads copied onto them.
 */
(function () {
  "use strict";

  const element = document.getElementById("hs-lazy-libraries");
  if (!element) return;
  const libraries = JSON.parse(element.textContent);

  function loadScript(url) {
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = url;
      script.onload = resolve;
      script.onerror = () => reject(new Error(`Cannot load ${url}`));
      document.head.appendChild(script);
    });
  }

  for (const [namespace, library] of Object.entries(libraries)) {
    const standIns = {};
    let loading = null;
    const load = () => {
      if (!loading) {
        loading = library.scripts.reduce((previous, url) => previous.then(() => loadScript(url)), Promise.resolve()).then(() => {
          const loaded = window[namespace];
          window[namespace] = standIns;
          for (const [name, value] of Object.entries(loaded)) {
            if (!(name in standIns)) standIns[name] = value;
            else Object.assign(standIns[name], value);
          }
          return loaded;
        });
      }
      return loading;
    };
    for (const type of library.components) {
      const Lazy = React.lazy(() => load().then((loaded) => ({ default: loaded[type] })));
      standIns[type] = function LazyComponent(props) {
        return React.createElement(React.Suspense, { fallback: null }, React.createElement(Lazy, props));
      };
    }
    window[namespace] = standIns;
  }
})();
