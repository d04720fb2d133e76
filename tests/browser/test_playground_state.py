"""The playground where a user leaves the happy path: a reload or a second tab while a reply
streams, client tool calls still pending after a reload, a send the server refuses, a run that
fails, a network down for seconds, the keyboard, and text that is long or right to left.

Same setup as test_playground.py: headless Chromium against a real uvicorn on SQLite, the
offline provider slowed down so a reply streams for seconds.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from playwright.async_api import Page, expect

from tests.browser.conftest import CuttableProxy, loopback_only
from tests.browser.test_playground import (
    DELAY_MS,
    STOPPED_WORDS,
    WORDS,
    api,
    new_conversation,
    send,
)


async def open_page(browser: Any, url: str) -> tuple[Any, Page, list[str]]:
    """A new context's page at ``url``, and the console errors and uncaught exceptions it logs."""
    context = await browser.new_context()
    await loopback_only(context)
    page = await context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    await page.goto(url)
    await expect(page.get_by_label("Provider")).to_have_value("offline")
    return context, page, errors


async def test_a_reload_mid_run_comes_back_to_the_running_reply(
    browser: Any, live_server: Any
) -> None:
    server = live_server(offline_delay_ms=DELAY_MS)
    context, page, _ = await open_page(browser, server.url + "/")
    conv_id = await new_conversation(page)
    await send(page, STOPPED_WORDS)
    log = page.get_by_role("log")
    await expect(log.locator(".msg.streaming")).to_contain_text("word3 ")
    await page.reload()
    await expect(page.locator("#title")).to_have_text(f"Conversation {conv_id}")
    await expect(log.locator(".msg.streaming")).to_contain_text("word12 ")
    await page.get_by_role("button", name="Stop").click()
    await expect(page.get_by_role("status")).to_have_text("Done: aborted")
    await expect(log.locator(".msg.incomplete")).to_contain_text("(cut short)")
    async with await api(server.url, None) as http:
        stored = (await http.get(f"/conversations/{conv_id}/messages")).json()["messages"]
    assert stored[-1]["incomplete"] is True and stored[-1]["text"] in await log.inner_text()
    await context.close()


async def test_a_second_tab_follows_the_run_and_can_stop_it(browser: Any, live_server: Any) -> None:
    server = live_server(offline_delay_ms=DELAY_MS)
    context, first, _ = await open_page(browser, server.url + "/")
    await new_conversation(first)
    await send(first, STOPPED_WORDS)
    await expect(first.get_by_role("log").locator(".msg.streaming")).to_contain_text("word3 ")
    second = await context.new_page()
    await second.goto(server.url + "/")
    await second.get_by_role("list", name="Conversations").get_by_role("button").first.click()
    await expect(second.get_by_role("log").locator(".msg.streaming")).to_contain_text("word8 ")
    await expect(second.get_by_role("button", name="Send")).to_be_disabled()
    await second.get_by_role("button", name="Stop").click()
    for page in (first, second):
        await expect(page.get_by_role("status")).to_have_text("Done: aborted")
        cut = page.get_by_role("log").locator(".msg.incomplete")
        await expect(cut).to_contain_text("(cut short)")
    await context.close()


async def test_pending_client_tool_calls_keep_their_form_after_a_reload_or_a_refused_send(
    browser: Any, live_server: Any
) -> None:
    server = live_server()
    context, page, _ = await open_page(browser, server.url + "/")
    await page.get_by_label("Client tools (JSON list)").fill(
        '[{"name": "lookup", "parameters": {"type": "object", "properties": {}}}]'
    )
    await new_conversation(page)
    await send(page, "call lookup {}")
    await expect(page.get_by_role("status")).to_have_text("Done: requires_action")
    await page.reload()
    await expect(page.get_by_role("form", name="Tool results")).to_be_visible()
    # a message instead of the results is refused (409); the form for them stays
    await send(page, "something else")
    await expect(page.get_by_role("status")).to_contain_text("Error 409")
    await expect(page.get_by_role("textbox", name="Message")).to_have_value("something else")
    await expect(page.get_by_role("form", name="Tool results")).to_be_visible()
    await page.get_by_label("Result of lookup({})").fill('{"found": "blue"}')
    await page.get_by_role("button", name="Submit tool results").click()
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    await expect(page.get_by_role("log").locator(".msg.assistant").last).to_contain_text("blue")
    await context.close()


async def test_a_refused_send_keeps_the_text_and_a_failed_run_says_why(
    browser: Any, live_server: Any
) -> None:
    server = live_server(max_text_chars=20)
    async with await api(server.url, None) as http:
        tiny = {"config": {"context_max_tokens": 1}}
        conv = (await http.post("/conversations", json=tiny)).json()
    context, page, _ = await open_page(browser, f"{server.url}/#{conv['id']}")
    await expect(page.locator("#title")).to_have_text(f"Conversation {conv['id']}")
    message = page.get_by_role("textbox", name="Message")
    too_long = "a message longer than twenty characters"
    await send(page, too_long)
    await expect(page.get_by_role("status")).to_contain_text("Error 422")
    await expect(message).to_have_value(too_long)
    await expect(page.get_by_role("log").locator(".msg")).to_have_count(0)
    await send(page, "short")
    await expect(page.get_by_role("status")).to_have_text("Done: failed")
    await expect(page.get_by_role("alert")).to_contain_text("context_too_long")
    await context.close()


async def test_a_network_down_for_seconds_still_resumes(browser: Any, live_server: Any) -> None:
    server = live_server(offline_delay_ms=DELAY_MS)
    async with CuttableProxy(server.port) as proxy:
        context, page, _ = await open_page(browser, proxy.url + "/")
        conv_id = await new_conversation(page)
        await send(page, WORDS)
        log = page.get_by_role("log")
        await expect(log.locator(".msg.streaming")).to_contain_text("word3 ")
        proxy.refusing = True
        proxy.cut()
        await expect(page.get_by_role("status")).to_contain_text("resuming (try 4)")
        await asyncio.sleep(3.0)  # down past the fourth retry (3.75 s after the cut)
        proxy.refusing = False
        await expect(page.get_by_role("status")).to_have_text("Done: completed", timeout=30_000)
        async with await api(server.url, None) as http:
            stored = (await http.get(f"/conversations/{conv_id}/messages")).json()["messages"]
        assert stored[-1]["text"] == WORDS
        await expect(log.locator(".msg.assistant").last).to_contain_text("word79")
        await context.close()


async def test_keyboard_only_and_text_that_is_long_or_right_to_left(
    browser: Any, live_server: Any
) -> None:
    server = live_server()
    context, page, errors = await open_page(browser, server.url + "/")
    await page.get_by_role("button", name="New conversation").focus()
    await page.keyboard.press("Enter")
    await expect(page.locator("#title")).to_contain_text("Conversation ")
    message = page.get_by_role("textbox", name="Message")
    await message.focus()
    await page.keyboard.type("first line")
    await page.keyboard.press("Shift+Enter")
    await page.keyboard.type("second line")
    await page.keyboard.press("Enter")
    log = page.get_by_role("log")
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    reply = log.locator(".msg.assistant").last
    await expect(reply).to_have_text("assistantfirst line\nsecond line")
    await expect(message).to_be_focused()
    await page.keyboard.type("x" * 3000)
    await page.keyboard.press("Enter")
    await expect(log.locator(".msg.assistant").last).to_contain_text("x" * 3000)
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    await message.fill("שלום עולם! (hello)")
    await page.keyboard.press("Enter")
    await expect(log.locator(".msg.assistant").last).to_contain_text("שלום")
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    bubbles = log.locator(".msg")
    widths = await bubbles.evaluate_all("els => els.map(e => e.scrollWidth - e.clientWidth)")
    assert max(widths) <= 1, "a long word runs out of its bubble"
    # the log re-renders when a run ends: a retrying assertion, not a handle that may detach
    await expect(bubbles.last).to_have_css("direction", "rtl")
    assert errors == []
    await expect(page.get_by_role("status")).not_to_have_text(re.compile("Error"))
    await context.close()


async def test_every_conversation_can_be_reached_from_the_list(
    browser: Any, live_server: Any
) -> None:
    server = live_server(page_size=3)
    async with await api(server.url, None) as http:
        for n in range(7):
            await http.post("/conversations", json={"metadata": {"title": f"chat {n}"}})
    context, page, errors = await open_page(browser, server.url + "/")
    listed = page.get_by_role("list", name="Conversations").get_by_role("button")
    await expect(listed).to_have_count(3)
    for shown in (6, 7):
        await page.get_by_role("button", name="More conversations").click()
        await expect(listed).to_have_count(shown)
    await expect(page.get_by_role("button", name="More conversations")).to_be_hidden()
    await listed.get_by_text("chat 0").click()
    await expect(page.locator("#title")).to_contain_text("Conversation ")
    await expect(listed).to_have_count(7)  # re-read after opening: still every page asked for
    assert errors == []
    await context.close()


async def test_a_run_that_ends_while_the_browser_is_offline_is_shown_once_back(
    browser: Any, live_server: Any
) -> None:
    """Offline emulation keeps the open stream but fails new requests: the run's ``done``
    arrives, re-reading the stored transcript fails until the network is back."""
    server = live_server(offline_delay_ms=DELAY_MS)
    context, page, _ = await open_page(browser, server.url + "/")
    conv_id = await new_conversation(page)
    await send(page, WORDS)
    log = page.get_by_role("log")
    await expect(log.locator(".msg.streaming")).to_contain_text("word3 ")
    await context.set_offline(True)
    await expect(page.get_by_role("status")).to_contain_text("Done: completed", timeout=30_000)
    await asyncio.sleep(1.0)
    await context.set_offline(False)
    await expect(page.get_by_role("status")).to_have_text("Done: completed", timeout=30_000)
    await expect(log.locator(".msg.user")).to_have_count(1)
    await expect(log.locator(".msg.assistant")).to_have_text(f"assistant{WORDS}")
    async with await api(server.url, None) as http:
        assert (await http.get(f"/conversations/{conv_id}")).json()["status"] == "idle"
    await context.close()


async def test_export_saves_the_document_as_the_api_serves_it(
    browser: Any, live_server: Any
) -> None:
    """Numbers JavaScript would round (a 20-digit integer, ``1.0``) are exported unchanged."""
    server = live_server()
    lookup = {"name": "lookup", "parameters": {"type": "object", "properties": {}}}
    call = {"role": "user", "text": 'call lookup {"n": 12345678901234567891, "f": 1.0}'}
    async with await api(server.url, None) as http:
        created = await http.post("/conversations", json={"config": {"client_tools": [lookup]}})
        conv_id = created.json()["id"]
        await http.post(f"/conversations/{conv_id}/stream", json={"messages": [call]})
        served = (await http.get(f"/conversations/{conv_id}/messages")).text
    assert "12345678901234567891" in served
    context, page, errors = await open_page(browser, f"{server.url}/#{conv_id}")
    await expect(page.locator("#title")).to_have_text(f"Conversation {conv_id}")
    async with page.expect_download() as download:
        await page.get_by_role("button", name="Export JSON").click()
    saved = Path(await (await download.value).path())
    assert await asyncio.to_thread(saved.read_text) == served
    assert errors == []
    await context.close()


async def test_an_id_in_the_address_that_names_no_conversation_calls_nothing_else(
    browser: Any, live_server: Any
) -> None:
    """``/#..`` must not become ``/conversations/..`` (that is ``/``), nor ``/#.`` the list;
    an undecodable fragment is no error either: the page starts without a conversation."""
    server = live_server()
    context = await browser.new_context()
    await loopback_only(context)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url.removeprefix(server.url)))
    for fragment in ("..", ".", "%2e%2E", "%E0%A4%A", "..%2Fproviders", "x%3Fy%3D1"):
        await page.goto("about:blank")
        requested.clear()
        await page.goto(f"{server.url}/#{fragment}")
        await expect(page).to_have_url(server.url + "/")
        await expect(page.get_by_label("Provider")).to_have_value("offline")
        calls = {path for path in requested if not path.startswith("/playground/")}
        asked = {f"/conversations/{quote(unquote(fragment), safe='')}"}
        assert calls <= {"/", "/providers", "/conversations"} | asked, fragment
        await expect(page.locator("#title")).to_have_text("No conversation yet: create one.")
        await expect(page.get_by_role("status")).to_have_text("")
        await expect(page.get_by_role("button", name="Send")).to_be_disabled()
    assert errors == []
    await context.close()


async def test_an_injected_assistant_message_is_added_only_when_typed_and_kept_when_refused(
    browser: Any, live_server: Any
) -> None:
    server = live_server(max_text_chars=20)
    context, page, _ = await open_page(browser, server.url + "/")
    conv_id = await new_conversation(page)
    await page.get_by_label("Role").select_option("assistant")
    await page.get_by_role("button", name="Send").click()  # an empty box adds nothing
    await expect(page.get_by_role("status")).to_have_text("Type the assistant message to add.")
    too_long = "an injected reply longer than allowed"
    await send(page, too_long)
    await expect(page.get_by_role("status")).to_contain_text("Error 422")
    await expect(page.get_by_role("textbox", name="Message")).to_have_value(too_long)
    await send(page, "A short reply.")
    await expect(page.get_by_role("status")).to_have_text("Assistant message added.")
    async with await api(server.url, None) as http:
        messages = (await http.get(f"/conversations/{conv_id}/messages")).json()["messages"]
    assert [m["text"] for m in messages] == ["A short reply."]
    await context.close()


async def test_a_changed_address_opens_the_conversation_it_names(
    browser: Any, live_server: Any
) -> None:
    """``page.goto`` to ``/#<id>`` from ``/`` changes only the fragment: no reload."""
    server = live_server()
    ids = []
    async with await api(server.url, None) as http:
        for text in ("first chat", "second chat"):
            created = await http.post("/conversations", json={"system_prompt": text})
            ids.append(created.json()["id"])
    context, page, errors = await open_page(browser, server.url + "/")
    for conv_id, text in zip(ids, ("first chat", "second chat"), strict=True):
        await page.goto(f"{server.url}/#{conv_id}")
        await expect(page.locator("#title")).to_have_text(f"Conversation {conv_id}")
        await expect(page.get_by_role("log")).to_have_text(f"system{text}")
    await page.goto(f"{server.url}/#no-such-conversation")
    await expect(page.locator("#title")).to_have_text("No conversation yet: create one.")
    await expect(page.get_by_role("log")).to_have_text("")
    await expect(page.get_by_role("button", name="Send")).to_be_disabled()
    assert [e for e in errors if "404" not in e] == []
    await context.close()


async def test_a_send_waits_for_the_opened_transcript(browser: Any, live_server: Any) -> None:
    """A message sent the moment a conversation opened, its transcript still being read (a busy
    server), used to start a run at once, whose streaming reply the transcript then replaced:
    the page showed no text until the run had ended. The send now waits for the transcript."""
    server = live_server(offline_delay_ms=DELAY_MS)
    context, page, errors = await open_page(browser, server.url + "/")
    shown = asyncio.Event()
    held: list[str] = []

    async def first_read_held(route: Any) -> None:
        if not held:
            held.append(route.request.url)
            await shown.wait()
        await route.continue_()

    await page.route(re.compile(r".*/conversations/[^/]+/messages$"), first_read_held)
    conv_id = await new_conversation(page)
    await send(page, STOPPED_WORDS)
    log = page.get_by_role("log")
    async with await api(server.url, None) as http:
        await asyncio.sleep(0.5)
        assert (await http.get(f"/conversations/{conv_id}")).json()["status"] == "idle"
        shown.set()
        await expect(log.locator(".msg.streaming")).to_contain_text("word3 ")
        assert (await http.get(f"/conversations/{conv_id}")).json()["status"] == "running"
        await expect(log.locator(".msg.streaming")).to_contain_text("word12 ")
        await http.post(f"/conversations/{conv_id}/cancel")
    await expect(page.get_by_role("status")).to_have_text("Done: aborted")
    assert len(held) == 1 and errors == []
    await context.close()
