"""Static HTML (``dashboards/static_html.py``): html components as plain data for one React component."""

from __future__ import annotations

import json

import pytest
from dash import dcc, html

from dashboards.static_html import NAMESPACE, html_tree, static_html


def test_html_components_become_tags_props_and_children() -> None:
    tree = html_tree(
        html.Div(
            [
                html.Span("a", className="x", style={"background": "red"}, title="t", n_clicks=3),
                "b",
                7,
                None,
                html.Details(html.Summary("s"), open=True, id="d", **{"data-kind": "k"}),
                html.ObjectEl(),
            ],
            className="top",
        )
    )
    assert tree == {
        "tag": "div",
        "props": {"className": "top"},
        "children": [
            {
                "tag": "span",
                "props": {"className": "x", "style": {"background": "red"}, "title": "t"},
                "children": ["a"],
            },
            "b",
            7,
            None,
            {
                "tag": "details",
                "props": {"open": True, "id": "d", "data-kind": "k"},
                "children": [{"tag": "summary", "props": {}, "children": ["s"]}],
            },
            {"tag": "object", "props": {}, "children": []},
        ],
    }


def test_a_static_component_is_one_dash_component_of_plain_json() -> None:
    component = static_html(html.P(["x", html.B("y")], id="p")).to_plotly_json()
    assert component["namespace"] == NAMESPACE and component["type"] == "StaticHtml"
    assert json.loads(json.dumps(component["props"]["tree"]))["children"][1]["tag"] == "b"


def test_components_that_need_dash_cannot_be_static() -> None:
    with pytest.raises(ValueError, match="Link needs Dash"):
        static_html(html.Div([dcc.Link("go", href="/x")]))
