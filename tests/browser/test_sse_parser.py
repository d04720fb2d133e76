"""The playground's SSE parser (app/web/static/sse.js, the one docs/frontend.md points to) in
the browser: the same events whatever line endings the stream uses and wherever it is cut."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.test_playground_state import open_page

PARSE = """async (chunks) => {
  const { parseSSE } = await import("/playground/sse.js");
  const bytes = new TextEncoder();
  const body = new ReadableStream({ start(controller) {
    for (const chunk of chunks) controller.enqueue(bytes.encode(chunk));
    controller.close();
  } });
  const events = [];
  for await (const event of parseSSE(body)) events.push(event);
  return events;
}"""
STREAM = (
    'id: r:1\nevent: content_block_delta\ndata: {"delta": "é"}\n\n'
    "id: r:2\nevent: done\ndata: {}\n\n"
)
EVENTS = [
    {"event": "content_block_delta", "data": '{"delta": "é"}', "id": "r:1"},
    {"event": "done", "data": "{}", "id": "r:2"},
]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
async def test_every_line_ending_cut_anywhere_gives_the_same_events(
    browser: Any, live_server: Any, newline: str
) -> None:
    server = live_server()
    context, page, _ = await open_page(browser, server.url + "/")
    text = STREAM.replace("\n", newline)
    cuts = [[text[:i], "", text[i:]] for i in range(1, len(text))]
    results = await page.evaluate(f"cuts => Promise.all(cuts.map({PARSE}))", cuts)
    for cut, events in zip(cuts, results, strict=True):
        assert events == EVENTS, cut
    await context.close()
