"""Attachments in the playground, in headless Chromium against a real uvicorn: an image
attached with the button goes up as a file and with the message by reference; the offline model
describes what it received; the transcript shows the image as a thumbnail (fetched with the key);
a pasted image and a dropped PDF go too, the PDF as a named chip; an image the model draws is
shown."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import Page, expect

from app.providers.png import draw_png
from tests.browser.conftest import loopback_only

PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


async def new_conversation(page: Page) -> str:
    await page.get_by_role("button", name="New conversation").click()
    await expect(page.locator("#title")).to_contain_text("Conversation ")
    return (await page.locator("#title").inner_text()).removeprefix("Conversation ").strip()


async def test_an_attached_image_reaches_the_offline_model(
    browser: Any, live_server: Any, tmp_path: Path
) -> None:
    server = live_server(api_keys="attach-key")
    picture = tmp_path / "cat.png"
    picture.write_bytes(draw_png(640, 480, "cat"))
    context = await browser.new_context()
    blocked = await loopback_only(context)
    await context.add_init_script("sessionStorage.setItem('parley.apiKey', 'attach-key')")
    page = await context.new_page()
    await page.goto(server.url + "/")
    await page.get_by_label("Image generation").check()
    conv_id = await new_conversation(page)

    async with page.expect_file_chooser() as chooser:
        await page.get_by_role("button", name="Attach").click()
    await (await chooser.value).set_files(str(picture))
    await expect(page.get_by_label("Files to send")).to_contain_text("cat.png")
    await page.get_by_role("textbox", name="Message").fill("What is in this?")
    await page.get_by_role("button", name="Send").click()
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    log = page.get_by_role("log")
    reply = log.locator(".msg.assistant").last
    await expect(reply).to_contain_text("[image: cat.png, image/png, 640×480]")
    thumb = log.locator(".msg.user .attachments img.thumb").last
    await expect(thumb).to_have_js_property("naturalWidth", 640)
    await expect(page.get_by_label("Files to send")).to_be_hidden()

    headers = {"Authorization": "Bearer attach-key"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers) as http:
        stored = (await http.get(f"/conversations/{conv_id}/messages")).json()
        (attachment,) = stored["messages"][-2]["attachments"]
        assert stored["version"] == "1.2"
        assert (attachment["name"], attachment["media_type"]) == ("cat.png", "image/png")
        assert "data" not in attachment  # by reference

    # a pasted image and a dropped PDF; the PDF is a named chip in the transcript
    await page.evaluate(
        """([png64, pdf]) => {
          const bytes = Uint8Array.from(atob(png64), (c) => c.charCodeAt(0));
          const opts = { bubbles: true, cancelable: true };
          const pasted = new DataTransfer();
          pasted.items.add(new File([bytes], "pasted.png", { type: "image/png" }));
          document.getElementById("message")
            .dispatchEvent(new ClipboardEvent("paste", { clipboardData: pasted, ...opts }));
          const dropped = new DataTransfer();
          dropped.items.add(new File([pdf], "report.pdf", { type: "application/pdf" }));
          document.getElementById("chat")
            .dispatchEvent(new DragEvent("drop", { dataTransfer: dropped, ...opts }));
        }""",
        [base64.b64encode(draw_png(32, 32, "pasted")).decode(), PDF.decode()],
    )
    chips = page.get_by_label("Files to send")
    await expect(chips).to_contain_text("pasted.png")
    await expect(chips).to_contain_text("report.pdf")
    await page.get_by_role("textbox", name="Message").fill("draw these")
    await page.get_by_role("button", name="Send").click()
    await expect(page.get_by_role("status")).to_have_text("Done: completed")
    await expect(log.locator(".msg.user .chip.attachment").last).to_contain_text("report.pdf")
    answer = log.locator(".msg.assistant").last
    await expect(answer).to_contain_text("[file: report.pdf, application/pdf")
    drawn = answer.locator(".attachments img.thumb")  # the offline model drew one
    await expect(drawn).to_have_js_property("naturalWidth", 64)
    assert blocked == []
    await context.close()
