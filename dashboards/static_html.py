"""Static HTML: a subtree of ``dash.html`` components that the browser draws as one React component.

Dash gives every component of a layout its own wrapper in the browser, and on the first render each wrapper reports
itself to the app's store once, a store update every other wrapper then checks: the cost grows with the square of
the page's components. On the 1k-span trace page (about 150 components, 90 of them the header's facts and the stage
panel's chips) that was 50-130 ms of the main thread at load 1-3 and 250-350 ms at load 8-10, between the layout's
arrival and the timeline's first paint (issue 13's 1 s goal). Parts of a page that no callback updates can instead
travel as one :class:`StaticHtml` whose ``tree`` prop holds the same elements as plain data; ``assets/static_html.js``
draws them with React directly. The DOM is the same (tags, classes, styles, ids, text); the elements are not Dash
components, so no callback may use one as an input, output or state.
"""

from __future__ import annotations

from typing import Any, ClassVar

from dash.development.base_component import Component

NAMESPACE = "hotspan_static"
"""The JavaScript namespace ``assets/static_html.js`` defines ``StaticHtml`` in."""
_HTML_NAMESPACE = "dash_html_components"
_DASH_ONLY_PROPS = frozenset({"children", "n_clicks", "n_clicks_timestamp", "disable_n_clicks", "setProps"})
"""Props of ``dash.html`` components that Dash handles itself rather than the element."""
_TAGS = {"MapEl": "map", "ObjectEl": "object"}
"""``dash.html`` components whose tag is not their name in lower case."""

Tree = str | int | float | None | list["Tree"] | dict[str, Any]
"""A node: text, a list of nodes, or ``{"tag": "div", "props": {...}, "children": [...]}``."""


class StaticHtml(Component):
    """A subtree of HTML elements drawn by React without a Dash wrapper per element (module docstring).

    Args:
        tree: the elements, as :func:`html_tree` gives them.
        id: this component's id (a container's, for callbacks that replace the whole subtree).
    """

    _children_props: ClassVar[list[str]] = []
    _base_nodes: ClassVar[list[str]] = ["children"]
    _namespace = NAMESPACE
    _type = "StaticHtml"

    def __init__(self, tree: Tree = None, id: str | None = None) -> None:
        self._prop_names = ["id", "tree"]
        self._valid_wildcard_attributes: list[str] = []
        self.available_properties = ["id", "tree"]
        self.available_wildcard_properties: list[str] = []
        super().__init__(tree=tree, **({"id": id} if id is not None else {}))


def static_html(component: Component) -> StaticHtml:
    """``component`` (``dash.html`` components, text and numbers all the way down) as one :class:`StaticHtml`.

    Raises:
        ValueError: a component of another library (``dcc.Link``, a graph) inside: those need Dash.
    """
    return StaticHtml(tree=html_tree(component))


def html_tree(node: object) -> Tree:
    """The plain-data form of ``node``: text and numbers as they are, lists element by element, an ``html``
    component as ``{"tag", "props", "children"}`` (its tag the component's name in lower case, its props but those
    Dash handles, ``children`` a list)."""
    if node is None or isinstance(node, str | int | float):
        return node
    if isinstance(node, list | tuple):
        return [html_tree(child) for child in node]
    if not isinstance(node, Component):
        raise ValueError(f"not a component or text: {node!r}")
    if node._namespace != _HTML_NAMESPACE:
        raise ValueError(f"{node._namespace}.{node._type} needs Dash: only dash.html components can be static")
    props = {name: value for name, value in node.to_plotly_json()["props"].items() if name not in _DASH_ONLY_PROPS}
    children = getattr(node, "children", None)
    children_list = children if isinstance(children, list | tuple) else [] if children is None else [children]
    tag = _TAGS.get(node._type, node._type.lower())
    return {"tag": tag, "props": props, "children": [html_tree(child) for child in children_list]}
