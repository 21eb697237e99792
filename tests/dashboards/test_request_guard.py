"""The UI's admission limit (``dashboards.request_guard``): requests that run page code (callbacks, layouts) run
``workers`` at a time, ``queue`` more wait, one more is answered 503 ``reads_busy`` with ``Retry-After`` at once;
assets pass uncounted. Over ASGI, against an app that holds each request until it is released."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx
from starlette.types import Receive, Scope, Send

from dashboards.request_guard import UiRequestGuard

CALLBACK = json.dumps({"output": "out.children", "outputs": {"id": "out", "property": "children"}, "inputs": []})


class HeldApp:
    """An ASGI app that answers assets at once and any other request once :attr:`release` is set, counting those
    inside it."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.inside = 0
        self.most_inside = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not scope["path"].startswith("/assets"):
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
            await self.release.wait()
            self.inside -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def _until(condition: Callable[[], bool]) -> None:
    """Return once ``condition()`` holds (checked as the loop runs other tasks); fail after 10 s."""
    deadline = asyncio.get_running_loop().time() + 10
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in 10 s"
        await asyncio.sleep(0.001)


def test_page_code_runs_workers_at_a_time_and_one_past_the_queue_is_refused() -> None:
    async def scenario() -> dict[str, object]:
        app = HeldApp()
        guard = UiRequestGuard(app, 1024 * 1024, lambda: {"out.children"}, workers=1, queue=1, retry_after_s=2.5)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard), base_url="http://ui") as client:
            running = asyncio.create_task(client.post("/_dash-update-component", content=CALLBACK))
            await _until(lambda: app.inside == 1)
            waiting = asyncio.create_task(client.get("/_dash-layout"))
            await _until(lambda: guard._admitted == 2)
            refused = await client.post("/_dash-update-component", content=CALLBACK)
            asset = await client.get("/assets/app.css")
            inside_while_full = app.inside
            app.release.set()
            answers = await asyncio.gather(running, waiting)
            again = await client.get("/_dash-layout")
        return {
            "refused": (refused.status_code, refused.json()["error"]["code"], refused.headers.get("retry-after")),
            "asset while full": asset.status_code,
            "inside while full": inside_while_full,
            "admitted": [answer.status_code for answer in answers],
            "most inside at once": app.most_inside,
            "after": again.status_code,
        }

    assert asyncio.run(scenario()) == {
        "refused": (503, "reads_busy", "3"),
        "asset while full": 200,
        "inside while full": 1,
        "admitted": [200, 200],
        "most inside at once": 1,
        "after": 200,
    }


def test_a_refused_body_frees_its_place() -> None:
    async def scenario() -> list[int]:
        app = HeldApp()
        app.release.set()
        guard = UiRequestGuard(app, 1024 * 1024, lambda: {"out.children"}, workers=1, queue=0, retry_after_s=1)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard), base_url="http://ui") as client:
            bad = await client.post("/_dash-update-component", content=b"not json")
            good = await client.post("/_dash-update-component", content=CALLBACK)
        return [bad.status_code, good.status_code]

    assert asyncio.run(scenario()) == [400, 200]
