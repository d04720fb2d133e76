"""The playground, /docs and the Origin check in headless Chromium against a real uvicorn.

The offline provider is slowed down so a reply streams for seconds: the test sees words arrive
while the run is still running (asked through the API), stops it, finds the partial reply
marked in the page and stored as incomplete, and sends again. PARLEY_SCREENSHOT=path saves the
playground screenshot there (the README's is docs/playground.png).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import os
import re
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from playwright.async_api import Page, expect

from tests.api.conftest import wait_for
from tests.browser.conftest import CuttableProxy, loopback_only

WORDS = " ".join(f"word{i}" for i in range(80))
DELAY_MS = 40
# A reply the tests stop midway: 16 s of words, so that a slow machine (a reload, a second tab,
# a click) still finds it running; stopped, it costs no more than WORDS.
STOPPED_WORDS = " ".join(f"word{i}" for i in range(400))


async def api(server_url: str, key: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(base_url=server_url, headers=headers, timeout=10)


async def new_conversation(page: Page) -> str:
    await page.get_by_role("button", name="New conversation").click()
    await expect(page.locator("#title")).to_contain_text("Conversation ")
    return (await page.locator("#title").inner_text()).removeprefix("Conversation ").strip()


async def send(page: Page, text: str) -> None:
    await page.get_by_role("textbox", name="Message").fill(text)
    await page.get_by_role("button", name="Send").click()


async def stop_mid_stream_then_continue(page: Page, http: httpx.AsyncClient) -> None:
    conv_id = await new_conversation(page)
    await send(page, STOPPED_WORDS)
    log = page.get_by_role("log")
    await expect(log.locator(".msg.streaming")).to_contain_text("word3 ")
    running = (await http.get(f"/conversations/{conv_id}")).json()
    assert running["status"] == "running", "the words arrived only after the run had ended"
    await page.get_by_role("button", name="Stop").click()
    await expect(page.get_by_role("status")).to_have_text("Done: aborted")
    cut = log.locator(".msg.incomplete")
    await expect(cut).to_contain_text("(cut short)")
    stored = (await http.get(f"/conversations/{conv_id}/messages")).json()["messages"][-1]
    assert stored["role"] == "assistant" and stored["incomplete"] is True
    assert stored["text"].startswith("word0 word1 word2 word3") and stored["text"] != STOPPED_WORDS
    assert stored["text"] in await cut.inner_text()

    await send(page, "once more, in full")
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    await expect(log.locator(".msg.assistant").last).to_contain_text("once more, in full")
    messages = (await http.get(f"/conversations/{conv_id}/messages")).json()["messages"]
    assert [m["role"] for m in messages[-3:]] == ["assistant", "user", "assistant"]
    assert "incomplete" not in messages[-1]


async def test_send_stop_and_continue_in_the_playground(
    browser: Any, live_server: Any, tmp_path: Path
) -> None:
    server = live_server(offline_delay_ms=DELAY_MS)
    context = await browser.new_context(viewport={"width": 1200, "height": 760})
    blocked = await loopback_only(context)
    page = await context.new_page()
    await page.goto(server.url + "/")
    await page.get_by_label("System prompt").fill("You are a helpful echo.")
    async with await api(server.url, None) as http:
        await stop_mid_stream_then_continue(page, http)
    screenshot = os.environ.get("PARLEY_SCREENSHOT") or str(tmp_path / "playground.png")
    assert len(await page.screenshot(path=screenshot)) > 10_000
    assert blocked == []
    await context.close()


async def test_a_conversation_made_before_the_providers_loaded_gets_the_default(
    browser: Any, live_server: Any
) -> None:
    """A click on "New conversation" right after the page opened, its list of providers still
    loading (a busy server), makes a conversation on the server's default provider — not one
    with an empty provider name, which the server refuses."""
    server = live_server()
    context = await browser.new_context()
    await loopback_only(context)
    page = await context.new_page()
    loaded = asyncio.Event()

    async def later(route: Any) -> None:
        await loaded.wait()
        await route.continue_()

    await page.route("**/providers", later)
    await page.goto(server.url + "/")
    conv_id = await new_conversation(page)
    loaded.set()
    await expect(page.get_by_label("Provider")).to_have_value("offline")
    async with await api(server.url, None) as http:
        made = (await http.get(f"/conversations/{conv_id}")).json()
    assert "provider" not in made["config"]  # none chosen: runs on the default (offline)
    await send(page, "hello")
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    await context.close()


async def test_the_playground_works_under_a_path_prefix(browser: Any, live_server: Any) -> None:
    """Served at /parley by a proxy (``uvicorn --root-path /parley``): the page loads its
    modules and calls the API under the prefix, streams, stops and continues; the docs link
    stays under it too."""
    server = live_server(prefix="/parley", offline_delay_ms=DELAY_MS)
    context = await browser.new_context()
    blocked = await loopback_only(context)
    page = await context.new_page()
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    await page.goto(server.url + "/")
    await expect(page.get_by_label("Provider")).to_have_value("offline")
    async with await api(server.url, None) as http:
        await stop_mid_stream_then_continue(page, http)
    docs = await page.get_by_role("link", name="API docs").get_attribute("href")
    assert docs == "/parley/docs"
    assert missing == [] and blocked == []
    await context.close()


async def test_the_playground_asks_for_a_key_when_one_is_required(
    browser: Any, live_server: Any
) -> None:
    server = live_server(offline_delay_ms=DELAY_MS, api_keys="browser-key")
    context = await browser.new_context()
    await loopback_only(context)
    page = await context.new_page()
    await page.goto(server.url + "/")
    await expect(page.get_by_role("dialog")).to_be_visible()
    # a key no header can carry (a typographic quote pasted with it) is asked for again
    await page.get_by_label("API key").fill("browser-key\u2019")
    await page.get_by_role("button", name="Save key").click()
    await expect(page.get_by_role("dialog")).to_contain_text("The server refused that key")
    # the field is the one thing labelled "API key" (the dialog is named otherwise)
    await page.get_by_label("API key").fill("browser-key")
    await page.get_by_role("button", name="Save key").click()
    await expect(page.get_by_label("Provider")).to_have_value("offline")
    stored = await page.evaluate("sessionStorage.getItem('parley.apiKey')")
    assert stored == "browser-key"
    async with await api(server.url, "browser-key") as http:
        await stop_mid_stream_then_continue(page, http)
        assert len((await http.get("/conversations")).json()["items"]) == 1
    async with await api(server.url, None) as anonymous:
        assert (await anonymous.get("/conversations")).status_code == 401
    await context.close()


async def test_server_and_client_tools_and_injected_messages(
    browser: Any, live_server: Any
) -> None:
    server = live_server()
    context = await browser.new_context()
    await loopback_only(context)
    page = await context.new_page()
    await page.goto(server.url + "/")
    await page.get_by_label("Client tools (JSON list)").fill(
        '[{"name": "lookup", "description": "Look a thing up.",'
        ' "parameters": {"type": "object", "properties": {}}}]'
    )
    conv_id = await new_conversation(page)
    log = page.get_by_role("log")
    await send(page, 'call add_numbers {"numbers": [1, 2]}')
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    await expect(log.locator(".msg.assistant").last).to_have_text("assistant3")
    await send(page, "call lookup {}")
    await expect(page.get_by_role("status")).to_have_text("Done: requires_action")
    await page.get_by_label("Result of lookup({})").fill('{"found": "blue"}')
    # "Send" names one button while the form is open too (Playwright matches names by part)
    await expect(page.get_by_role("button", name="Send")).to_have_count(1)
    await page.get_by_role("button", name="Submit tool results").click()
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    await expect(log.locator(".msg.assistant").last).to_contain_text("blue")
    await page.get_by_label("Role").select_option("assistant")
    await send(page, "An injected reply.")
    await expect(log.locator(".msg.assistant").last).to_have_text("assistantAn injected reply.")
    async with await api(server.url, None) as http:
        messages = (await http.get(f"/conversations/{conv_id}/messages")).json()["messages"]
    assert messages[-1] == {
        "type": "TextMessage",
        "text": "An injected reply.",
        "role": "assistant",
    }
    async with page.expect_download() as download:
        await page.get_by_role("button", name="Export JSON").click()
    saved = Path(await (await download.value).path())
    exported = await asyncio.to_thread(saved.read_text)
    assert '"An injected reply."' in exported
    await context.close()


async def test_reasoning_streams_collapsed_above_the_reply(browser: Any, live_server: Any) -> None:
    """Reasoning "low" on a new conversation: the offline model's thought streams into a
    collapsed block above the reply, stays there once stored and after a reload; the select
    patches the open conversation's config (provider default: none set)."""
    server = live_server(offline_delay_ms=150)  # the thought streams for about two seconds
    context = await browser.new_context()
    await loopback_only(context)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    await page.goto(server.url + "/")
    await expect(page.get_by_label("Provider")).to_have_value("offline")
    await page.get_by_label("Reasoning").select_option("low")
    conv_id = await new_conversation(page)
    log = page.get_by_role("log")
    await send(page, "why is the sky blue")
    await expect(log.locator("details.reasoning.streaming")).to_contain_text("The last message")
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    thought = "The last message has 5 words, so I will echo it back."
    reasoning = log.locator("details.reasoning")
    await expect(reasoning).to_have_count(1)
    await expect(reasoning.locator(".thought")).to_be_hidden()  # collapsed
    await expect(log.locator(".msg.assistant").last).to_have_text("assistantwhy is the sky blue")
    above = "([r, a]) => !!(r.compareDocumentPosition(a) & Node.DOCUMENT_POSITION_FOLLOWING)"
    pair = [reasoning, log.locator(".msg.assistant").last]
    assert await page.evaluate(above, [await e.element_handle() for e in pair])
    await reasoning.locator("summary").click()
    await expect(reasoning.locator(".thought")).to_have_text(thought)
    async with await api(server.url, None) as http:
        conversation = (await http.get(f"/conversations/{conv_id}")).json()
        assert conversation["config"]["reasoning"] == {"effort": "low"}
        messages = (await http.get(f"/conversations/{conv_id}/messages")).json()["messages"]
        assert [m["type"] for m in messages] == ["TextMessage", "ReasoningMessage", "TextMessage"]
        assert messages[1]["text"] == thought

        await page.get_by_label("Reasoning").select_option("none")
        await expect(page.get_by_role("status")).to_have_text("Reasoning: none.")
        conversation = (await http.get(f"/conversations/{conv_id}")).json()
        assert conversation["config"]["reasoning"] == {"effort": "none"}
        await send(page, "no thinking now")
        await expect(page.get_by_role("status")).to_have_text("Done: completed")
        await expect(log.locator(".msg.assistant").last).to_contain_text("no thinking now")
        await expect(reasoning).to_have_count(1)
        await page.get_by_label("Reasoning").select_option("")
        await expect(page.get_by_role("status")).to_have_text("Reasoning: provider default.")
        conversation = (await http.get(f"/conversations/{conv_id}")).json()
        assert "reasoning" not in conversation["config"]

    await page.reload()  # the transcript as stored: the reasoning block comes back, collapsed
    await expect(page.locator("#title")).to_have_text(f"Conversation {conv_id}")
    await expect(reasoning).to_have_count(1)
    await expect(reasoning.locator(".thought")).to_be_hidden()
    await expect(reasoning).to_contain_text(thought)
    await expect(page.get_by_label("Reasoning")).to_have_value("")
    assert errors == []
    await context.close()


async def test_docs_and_redoc_render_with_the_network_unplugged(
    browser: Any, live_server: Any
) -> None:
    server = live_server()
    context = await browser.new_context()
    blocked = await loopback_only(context)
    page = await context.new_page()
    await page.goto(server.url + "/docs")
    operations = page.locator(".opblock")
    await expect(operations.first).to_be_visible()
    assert await operations.count() >= 12
    await expect(page.get_by_text("/conversations/{conversation_id}/stream").first).to_be_visible()
    await page.goto(server.url + "/redoc")
    await expect(page.get_by_role("heading", name="List Providers")).to_be_visible()
    # ReDoc's "API docs by Redocly" logo (from its CDN) is refused by the page's policy: the
    # browser does not even ask for it
    await expect(page.get_by_role("img", name="redocly logo")).to_have_count(0)
    assert blocked == []
    await context.close()


@contextlib.contextmanager
def foreign_site(html: str) -> Iterator[str]:
    """A page served by a plain HTTP server on another loopback port: another origin, and a
    real loopback address, so Chrome's local-network protection lets its requests through."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# Tries every way a page can make a cross-origin GET or POST to the URL in its query string.
ATTACK_PAGE = """<!doctype html><body><script>
  const url = decodeURIComponent(location.search.slice(1));
  const img = document.createElement("img"); img.src = url; document.body.append(img);
  new EventSource(url);
  fetch(url, {mode: "no-cors"}).catch(() => {});
  fetch(url, {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"})
    .catch(() => {});
</script></body>"""


async def visit(browser: Any, url: str, until: Callable[[], Awaitable[bool]] | None = None) -> None:
    """Open ``url`` in a new context; keep it open until ``until()`` holds (up to 30 s), or
    for a second when nothing is expected to happen."""
    context = await browser.new_context()
    await loopback_only(context)
    page = await context.new_page()
    await page.goto(url)
    if until is None:
        await asyncio.sleep(1.0)  # the requests are answered in milliseconds; no event says so
    else:  # what is expected to happen may take longer on a loaded machine
        await wait_for(until, within=30.0)
    await context.close()


async def test_a_page_on_another_origin_starts_no_run(browser: Any, live_server: Any) -> None:
    server = live_server()
    async with await api(server.url, None) as http:
        conv = (await http.post("/conversations", json={})).json()
        await http.post(
            f"/conversations/{conv['id']}/deltas",
            json={"messages": [{"role": "user", "text": "spend money"}]},
        )
        path = f"/conversations/{conv['id']}/stream"
        with foreign_site(ATTACK_PAGE) as evil:
            await visit(browser, f"{evil}/?{quote(server.url + path)}")
            after = (await http.get(f"/conversations/{conv['id']}")).json()
            assert (after["message_count"], after["version"], after["status"]) == (1, 2, "idle")

            # The same page does run the conversation once an operator lists its origin.
            async def ran() -> bool:
                state = (await http.get(f"/conversations/{conv['id']}")).json()
                return bool(state["message_count"] > 1)

            allowing = live_server(cors_origins=evil)
            await visit(browser, f"{evil}/?{quote(allowing.url + path)}", until=ran)
        assert await ran(), "a listed origin should be able to run"


async def test_a_dropped_connection_resumes_after_the_last_event_id(
    browser: Any, live_server: Any
) -> None:
    """The page streams with on_disconnect=continue, so the run goes on when the connection
    drops; the page then asks GET …/stream (which only follows) with the last event id it saw
    and follows the run to its end."""
    server = live_server(offline_delay_ms=DELAY_MS)
    async with CuttableProxy(server.port) as proxy:
        context = await browser.new_context()
        await loopback_only(context)
        sent: list[Any] = []
        context.on("request", lambda request: sent.append(request))
        page = await context.new_page()
        await page.goto(proxy.url + "/")
        conv_id = await new_conversation(page)
        await send(page, WORDS)
        log = page.get_by_role("log")
        await expect(log.locator(".msg.streaming")).to_contain_text("word3 ")
        proxy.cut()
        await _check_the_resume(page, sent, server.url, conv_id)
        await context.close()


async def _check_the_resume(page: Page, sent: list[Any], server_url: str, conv_id: str) -> None:
    status = page.get_by_role("status")
    await expect(status).to_have_text(re.compile("^(Done: |The stream ended)"), timeout=30_000)
    streams = [r for r in sent if r.url.split("?")[0].endswith("/stream")]
    assert [r.method for r in streams[:2]] == ["POST", "GET"]  # a run starts by POST only
    assert streams[0].url.endswith("?on_disconnect=continue")
    last_event_id = await streams[1].header_value("last-event-id")
    assert last_event_id is not None and last_event_id != ""
    async with await api(server_url, None) as http:
        probe = await http.get(
            f"/conversations/{conv_id}/stream", headers={"Last-Event-ID": last_event_id}
        )
        messages = (await http.get(f"/conversations/{conv_id}/messages")).json()["messages"]
    assert probe.status_code == 200  # the log still holds what came after that id
    await expect(status).to_have_text("Done: completed")
    assert messages[-1]["text"] == WORDS
    assert "incomplete" not in messages[-1]
