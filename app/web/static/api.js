// Parley's HTTP API for the playground: the API key, JSON requests, and runs streamed with
// fetch() + parseSSE, resumed with Last-Event-ID after a dropped connection.
import { parseSSE } from "./sse.js";

const KEY = "parley.apiKey";
// Where Parley is served: "" at the host's root, "/parley" under a prefix (uvicorn --root-path
// behind a proxy). This module is served at <root>/playground/api.js.
const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

export class AuthRequired extends Error {}

export class ApiError extends Error {
  constructor(problem, status) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.problem = problem;
    this.status = status;
  }
}

export const apiKey = {
  get: () => sessionStorage.getItem(KEY),
  set: (key) => sessionStorage.setItem(KEY, key),
  clear: () => sessionStorage.removeItem(KEY),
};

function headers(extra = {}) {
  const h = { ...extra };
  const key = apiKey.get();
  // A key fetch() cannot put in a header (a pasted typographic quote: not ASCII) goes as none,
  // so the server's 401 has the page ask again instead of every request failing.
  if (key && /^[\x20-\x7e]+$/.test(key)) h.Authorization = `Bearer ${key}`;
  return h;
}

async function check(response) {
  if (response.status === 401) throw new AuthRequired("an API key is required");
  if (!response.ok) {
    let problem = {};
    try { problem = await response.json(); } catch { /* not JSON */ }
    throw new ApiError(problem, response.status);
  }
  return response;
}

// The path of conversation `id`, or of `rest` under it. "." and ".." are no ids (a URL would
// resolve them to another path): the server has no such conversation.
export function conversationPath(id, rest = "") {
  if (id === "." || id === "..") throw new ApiError({ detail: `no conversation ${id}` }, 404);
  return `/conversations/${encodeURIComponent(id)}${rest}`;
}

export async function request(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await check(await fetch(ROOT + path, init));
  return response.status === 204 ? null : response.json();
}

// The body as the server wrote it (an export must keep the numbers JSON.parse would round).
export async function requestText(path) {
  const response = await check(await fetch(ROOT + path, { headers: headers() }));
  return response.text();
}

// Upload a file (multipart, field `file`): the stored file's description (`id`, `name`, …).
export async function uploadFile(file, name) {
  const form = new FormData();
  form.append("file", file, name);
  const response = await check(await fetch(ROOT + "/files", { method: "POST", headers: headers(), body: form }));
  return response.json();
}

// A stored file's bytes, as a Blob of its media type (fetched with the key, when one is set).
export async function fileContent(fileId) {
  const path = `/files/${encodeURIComponent(fileId)}/content`;
  const response = await check(await fetch(ROOT + path, { headers: headers() }));
  return response.blob();
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Run the conversation and call onEvent(name, payload) for every event. A run starts by POST
// only (GET never starts one): with `bundle` (a delta bundle), or without one to run the
// conversation as it is. With `lastEventId` (`<run_id>:0` for a run's start) it only follows the
// running run from there (a GET). The run goes on if the connection
// drops (on_disconnect=continue); we then follow it again — after the last event id we saw, or
// from its first event when none came yet — `retries` times with backoff (250 ms doubling, at
// most 4 s: about 30 s in all). Aborting `signal` only detaches this reader. Resolves with the
// `done` payload, or null if the stream ended without one (or nothing runs: a GET's 204).
export async function streamRun(conversationId, bundle, onEvent,
  { retries = 10, signal, lastEventId = null } = {}) {
  const url = ROOT + conversationPath(conversationId, "/stream?on_disconnect=continue");
  const follow = ROOT + conversationPath(conversationId, "/stream");
  let lastId = lastEventId;
  const accept = { Accept: "text/event-stream" };
  const following = () => [follow, { method: "GET", signal,
    headers: headers(lastId === null ? accept : { ...accept, "Last-Event-ID": lastId }) }];
  let target;
  if (lastId !== null) target = following();
  else if (bundle !== undefined) {
    target = [url, { method: "POST", signal, body: JSON.stringify(bundle),
      headers: headers({ ...accept, "Content-Type": "application/json" }) }];
  } else target = [url, { method: "POST", signal, headers: headers(accept) }]; // no body: as it is
  for (let attempt = 0; ; attempt++) {
    try {
      const response = await check(await fetch(...target));
      if (response.status === 204) return null; // nothing runs, or nothing left: the run is over
      for await (const sse of parseSSE(response.body)) {
        if (sse.id !== null) lastId = sse.id;
        const payload = sse.data ? JSON.parse(sse.data) : {};
        onEvent(sse.event, payload);
        if (sse.event === "done") return payload;
      }
    } catch (error) {
      if (error instanceof AuthRequired || error instanceof ApiError || signal?.aborted) throw error;
      // a network error: the connection dropped; resume below
    }
    if (attempt >= retries) return null;
    onEvent("reconnecting", { attempt: attempt + 1 });
    await sleep(Math.min(250 * 2 ** attempt, 4000));
    signal?.throwIfAborted();
    target = following();
  }
}
