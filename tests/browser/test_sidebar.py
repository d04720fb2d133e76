"""The playground's sidebar in headless Chromium against a real uvicorn (offline model, titles
made with PARLEY_AUTO_TITLE): it shows the title made after the first reply, renames it in
place, finds a conversation by a word of its reply, and archives and restores it."""

from __future__ import annotations

from typing import Any

from playwright.async_api import expect

from tests.browser.conftest import loopback_only
from tests.browser.test_playground import api, new_conversation, send


async def test_the_sidebar_shows_titles_renames_searches_and_archives(
    browser: Any, live_server: Any
) -> None:
    server = live_server(auto_title=True)
    async with await api(server.url, None) as http:
        other = (await http.post("/conversations", json={})).json()["id"]
        await http.post(
            f"/conversations/{other}/stream",
            json={"messages": [{"role": "user", "text": "Tell me about glaciers"}]},
        )
    context = await browser.new_context()
    await loopback_only(context)
    page = await context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    await page.goto(server.url + "/")
    listed = page.get_by_role("list", name="Conversations")
    await expect(listed.get_by_role("button", name="Tell me about glaciers")).to_be_visible()

    conv_id = await new_conversation(page)
    await send(page, "Where do penguins live in winter months")
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    # The title made after the first reply (the offline model: its first six words).
    made = "Where do penguins live in winter"
    await expect(listed.get_by_role("button", name=made)).to_be_visible()
    await expect(page.locator("#conv-name")).to_have_text(made)

    await page.get_by_role("button", name="Rename").click()
    box = listed.get_by_role("textbox", name="New title")
    await expect(box).to_have_value(made)
    await box.fill("Penguin notes")
    await box.press("Enter")
    await expect(listed.get_by_role("button", name="Penguin notes")).to_be_visible()
    async with await api(server.url, None) as http:
        stored = (await http.get(f"/conversations/{conv_id}")).json()
    assert stored["title"] == "Penguin notes"

    # A word of the reply (the offline model echoes the message) finds it, and only it.
    await page.get_by_role("searchbox", name="Search").fill("winter")
    await expect(listed.get_by_role("button")).to_have_count(1)
    found = listed.get_by_role("button").first
    await expect(found).to_contain_text("Penguin notes")
    await expect(found.locator(".snippet")).to_contain_text("winter")
    await page.get_by_role("searchbox", name="Search").fill("")
    await expect(listed.get_by_role("button")).to_have_count(2)

    await page.get_by_role("button", name="Archive").click()
    await expect(listed.get_by_role("button")).to_have_count(1)
    await page.get_by_label("Show archived").check()
    await expect(listed.get_by_role("button")).to_have_count(1)
    await expect(listed.get_by_role("button").first).to_contain_text("Penguin notes")
    await page.get_by_role("button", name="Restore").click()
    await page.get_by_label("Show archived").uncheck()
    await expect(listed.get_by_role("button")).to_have_count(2)
    assert errors == []
    await context.close()
