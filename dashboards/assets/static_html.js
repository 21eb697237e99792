/*
 * StaticHtml (dashboards/static_html.py): a subtree of HTML elements sent as plain data, drawn here by React as one
 * component, without the Dash wrapper (and its store updates) each Dash component gets. A node is text, a number,
 * null, a list of nodes, or {tag, props, children}; props are React's (className, style, title, open ...).
 */
(function () {
  "use strict";

  function element(node) {
    if (node === null || typeof node !== "object") return node;
    if (Array.isArray(node)) return node.map(element);
    return window.React.createElement(node.tag, node.props, ...node.children.map(element));
  }

  function StaticHtml(props) {
    return element(props.tree === undefined ? null : props.tree);
  }

  window.hotspan_static = Object.assign({}, window.hotspan_static, { StaticHtml: StaticHtml });
})();
