// A useChat without React: the `ai` package's own AbstractChat (the class @ai-sdk/react's
// useChat wraps) on a plain state, and a DefaultChatTransport with only `api` and `headers`.
// The one extra is a `fetch` that records each response for the checks (it changes nothing),
// and, for the dropped-connection scenario, cuts one.
import assert from "node:assert/strict";
import { AbstractChat, DefaultChatTransport, parseJsonEventStream, uiMessageChunkSchema } from "ai";

class PlainState {
  constructor(messages = []) {
    this.status = "ready";
    this.error = undefined;
    this.messages = messages;
  }
  pushMessage(message) {
    this.messages = this.messages.concat(message);
  }
  popMessage() {
    this.messages = this.messages.slice(0, -1);
  }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(value) {
    return structuredClone(value);
  }
}

export class Chat extends AbstractChat {
  constructor({ messages, ...options }) {
    super({ ...options, state: new PlainState(messages) });
  }
}

export const BASE = process.env.PARLEY_URL;
export const HEADERS = { Authorization: "Bearer test-key" };

/** Every response the transport got: status, headers, and its body's text (read alongside). */
export const responses = [];

/** A fetch that records responses; `cut(request)` may return a byte count after which the
 * body fails as a dropped connection does (a TypeError naming the network). */
export function recordingFetch({ cut } = {}) {
  return async (url, init) => {
    const controller = new AbortController();
    init?.signal?.addEventListener("abort", () => controller.abort(init.signal.reason));
    const response = await fetch(url, { ...init, signal: controller.signal });
    const record = { url: String(url), method: init?.method ?? "GET", status: response.status,
      headers: Object.fromEntries(response.headers), text: "", done: false };
    responses.push(record);
    if (!response.body) return response;
    const limit = cut?.(record);
    const decoder = new TextDecoder();
    const reader = response.body.getReader();
    let seen = 0;
    const body = new ReadableStream({
      async pull(out) {
        let next;
        try {
          next = await reader.read();
        } catch (error) {
          out.error(error);
          return;
        }
        if (next.done) {
          record.done = true;
          out.close();
          return;
        }
        record.text += decoder.decode(next.value, { stream: true });
        seen += next.value.length;
        out.enqueue(next.value);
        if (limit !== undefined && seen >= limit) {
          controller.abort();  // the connection is gone: the server sees the client leave
          out.error(new TypeError("network error: the connection was lost"));
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
}

export function transport(query = "", options = {}) {
  return new DefaultChatTransport({ api: `${BASE}/ai-sdk/chat${query}`, headers: HEADERS, ...options });
}

/** The chunks of a recorded stream, each validated by the `ai` package's own chunk schema;
 * whether it ended with `data: [DONE]`. */
export async function chunksOf(record) {
  const bytes = new TextEncoder().encode(record.text);
  const stream = parseJsonEventStream({
    stream: new ReadableStream({ start(c) { c.enqueue(bytes); c.close(); } }),
    schema: uiMessageChunkSchema,
  });
  const chunks = [];
  for await (const parsed of stream) {
    assert.ok(parsed.success, `a chunk the ai package refuses: ${parsed.error} in ${record.text}`);
    chunks.push(parsed.value);
  }
  const frames = record.text.split("\n\n").filter((f) => f.trim());
  for (const f of frames) assert.match(f, /^data: /, `a frame that is not data: ${f}`);
  return { chunks, ended: frames.at(-1) === "data: [DONE]" };
}

export function checkProtocol(record) {
  assert.equal(record.status, 200, record.text);
  assert.equal(record.headers["x-vercel-ai-ui-message-stream"], "v1");
  assert.match(record.headers["content-type"], /^text\/event-stream/);
}

export async function api(path, init = {}) {
  const response = await fetch(`${BASE}${path}`, {
    ...init, headers: { ...HEADERS, "content-type": "application/json", ...init.headers },
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

export async function waitFor(check, what, within = 15000) {
  const deadline = Date.now() + within;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A message's parts as both sides can compare them: no streaming bookkeeping. */
export function shape(message) {
  return {
    role: message.role,
    parts: message.parts.map((p) => {
      const kept = { type: p.type };
      for (const key of ["text", "toolCallId", "input", "output", "errorText", "mediaType"]) {
        if (p[key] !== undefined) kept[key] = p[key];
      }
      if (p.type.startsWith("tool-")) kept.state = p.state;
      return kept;
    }),
  };
}

export function textOf(message) {
  return message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
}
