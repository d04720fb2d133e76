// useChat's flows against a live Parley, one scenario per run:
//   node tests/scenarios.mjs <scenario> <conversation id>
// with PARLEY_URL set. Prints a JSON summary for the Python side (which checks what was
// stored); fails (exit 1) on any broken expectation here.
import assert from "node:assert/strict";
import { lastAssistantMessageIsCompleteWithToolCalls, readUIMessageStream } from "ai";
import {
  BASE, HEADERS, Chat, api, checkProtocol, chunksOf, recordingFetch, responses, shape, textOf, transport, waitFor,
} from "./chat.mjs";

const [scenario, id] = process.argv.slice(2);

async function storedUIMessages() {
  const { status, body } = await api(`/conversations/${id}/messages?format=ai-sdk`);
  assert.equal(status, 200);
  return body;
}

/** Every recorded stream: the protocol's header, chunks the ai package accepts, [DONE] last. */
async function checkStreams({ allowCut = false } = {}) {
  const types = [];
  for (const record of responses.filter((r) => r.status === 200)) {
    checkProtocol(record);
    const { chunks, ended } = await chunksOf(record);
    if (!allowCut) assert.ok(ended, `a stream that did not end with [DONE]: ${record.text}`);
    types.push(chunks.map((c) => c.type));
  }
  return types;
}

/** The chat and the stored history agree: same assistant ids, same parts. */
async function sameAsStored(chat) {
  const stored = await storedUIMessages();
  assert.deepEqual(chat.messages.map(shape), stored.map(shape));
  const ids = (list) => list.filter((m) => m.role === "assistant").map((m) => m.id);
  assert.deepEqual(ids(chat.messages), ids(stored));
  assert.deepEqual(await storedUIMessages(), stored, "a second read gives the same ids");
  return stored;
}

const scenarios = {
  // A streamed reply with reasoning and a server tool, then a plain one.
  async send() {
    const chat = new Chat({ id, transport: transport("", { fetch: recordingFetch() }) });
    await chat.sendMessage({ text: 'call add_numbers {"numbers": [1, 2]}' });
    assert.equal(chat.status, "ready", String(chat.error));
    const reply = chat.messages[1];
    const tool = reply.parts.find((p) => p.type === "tool-add_numbers");
    assert.equal(tool.state, "output-available");
    assert.deepEqual(tool.input, { numbers: [1, 2] });
    assert.equal(tool.output, 3);
    assert.ok(reply.parts.some((p) => p.type === "reasoning" && p.text.includes("add_numbers")));
    assert.equal(reply.parts.filter((p) => p.type === "step-start").length, 2);
    assert.equal(textOf(reply), "3");
    await chat.sendMessage({ text: "Hello there, Parley" });
    assert.equal(textOf(chat.messages[3]), "Hello there, Parley");
    const types = await checkStreams();
    for (const expected of ["start", "start-step", "reasoning-start", "reasoning-delta",
      "reasoning-end", "tool-input-start", "tool-input-delta", "tool-input-available",
      "tool-output-available", "finish-step", "text-start", "text-delta", "text-end", "finish"]) {
      assert.ok(types[0].includes(expected), `no ${expected} chunk in ${types[0]}`);
    }
    const stored = await sameAsStored(chat);
    // readUIMessageStream builds the same reply from the same chunks.
    const { chunks } = await chunksOf(responses[1]);
    let built;
    for await (const message of readUIMessageStream({
      stream: new ReadableStream({ start(c) { chunks.forEach((x) => c.enqueue(x)); c.close(); } }),
    })) built = message;
    assert.deepEqual(shape(built), shape(stored[3]));
    assert.equal(built.id, stored[3].id);
    return { ids: stored.map((m) => m.id), chunkTypes: types };
  },

  // Stop mid-reply: the fetch is aborted; Parley cancels the run and stores the partial reply.
  async stop() {
    const chat = new Chat({ id, transport: transport("", { fetch: recordingFetch() }) });
    const words = Array.from({ length: 200 }, (_, i) => `word${i}`).join(" ");
    const sent = chat.sendMessage({ text: words });
    await waitFor(() => chat.messages[1] && textOf(chat.messages[1]).length > 20, "some text");
    await chat.stop();
    await sent;
    assert.equal(chat.status, "ready");
    const seen = textOf(chat.messages[1]);
    assert.ok(seen.length < words.length, "the whole reply came before the stop");
    return { seen };
  },

  // The connection drops mid-reply (on_disconnect=continue keeps the run going); resume
  // replays the reply from its start and the chat ends with it whole, once.
  async resume() {
    let cutOnce = false;
    const fetch = recordingFetch({
      cut: (r) => (r.method === "POST" && !cutOnce ? ((cutOnce = true), 400) : undefined),
    });
    const chat = new Chat({ id, transport: transport("?on_disconnect=continue", { fetch }) });
    const text = Array.from({ length: 60 }, (_, i) => `w${i}`).join(" ");
    await chat.sendMessage({ text });
    assert.equal(chat.status, "error", "the cut connection is an error");
    await chat.resumeStream();
    assert.equal(chat.status, "ready", String(chat.error));
    assert.equal(chat.messages.length, 2);
    assert.equal(textOf(chat.messages[1]), text);
    const gets = responses.filter((r) => r.method === "GET");
    assert.equal(gets.length, 1);
    await checkStreams({ allowCut: true });
    assert.ok((await chunksOf(gets[0])).ended);
    await sameAsStored(chat);
    return { resumed: gets[0].status };
  },

  // A page load with nothing running: the resume GET is 204 and the chat stays as loaded.
  async idle() {
    const messages = await storedUIMessages();
    const chat = new Chat({ id, messages, transport: transport("", { fetch: recordingFetch() }) });
    await chat.resumeStream();
    assert.equal(chat.status, "ready");
    assert.deepEqual(chat.messages, messages);
    assert.deepEqual(responses.map((r) => [r.method, r.status]), [["GET", 204]]);
    return { statuses: responses.map((r) => r.status) };
  },

  // Regenerate: the last reply is rewound away and made again, under the same position's id.
  async regenerate() {
    const messages = await storedUIMessages();
    assert.equal(messages.length, 2);
    const chat = new Chat({ id, messages, transport: transport("", { fetch: recordingFetch() }) });
    await chat.regenerate();
    assert.equal(chat.status, "ready", String(chat.error));
    assert.equal(chat.messages.length, 2);
    assert.equal(chat.messages[1].id, messages[1].id);
    await checkStreams();
    const stored = await sameAsStored(chat);
    return { text: textOf(stored[1]) };
  },

  // A client tool: the reply ends awaiting it; addToolResult sends its output, the run goes on
  // and the same assistant message is continued.
  async "client-tool"() {
    const chat = new Chat({
      id,
      transport: transport("", { fetch: recordingFetch() }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
      onToolCall: ({ toolCall }) => {
        chat.addToolResult({
          tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: { city: "Paris" },
        });
      },
    });
    await chat.sendMessage({ text: "call get_location {}" });
    await waitFor(() => chat.status === "ready" && responses.length === 2 && textOf(chat.messages[1]),
      "the run after the tool result");
    assert.equal(chat.messages.length, 2);
    const reply = chat.messages[1];
    const tool = reply.parts.find((p) => p.type === "tool-get_location");
    assert.equal(tool.state, "output-available");
    assert.equal(textOf(reply), '{"city": "Paris"}');
    const types = await checkStreams();
    assert.equal(types[0].at(-1), "finish");
    const first = (await chunksOf(responses[0])).chunks;
    assert.equal(first.at(-1).finishReason, "tool-calls");
    await sameAsStored(chat);
    return { chunkTypes: types };
  },

  // Files: a user message's attached image goes as a file part (a data: URL, as useChat sends
  // a picked file) and is stored as a file; an image the model draws comes as a file chunk
  // whose url is the file's content route (under the server's root path); both read back as
  // file parts of the stored UIMessages.
  async files() {
    const chat = new Chat({ id, transport: transport("", { fetch: recordingFetch() }) });
    const png = process.env.PARLEY_PNG;
    const picked = { type: "file", mediaType: "image/png", filename: "cat.png",
      url: `data:image/png;base64,${png}` };
    await chat.sendMessage({ text: "What is this?", files: [picked] });
    assert.equal(chat.status, "ready", String(chat.error));
    assert.match(textOf(chat.messages[1]), /^\[image: cat\.png, image\/png, \d+×\d+\]/);
    await chat.sendMessage({ text: "draw a cat" });
    assert.equal(chat.status, "ready", String(chat.error));
    const drawn = chat.messages[3].parts.find((p) => p.type === "file");
    assert.equal(drawn.mediaType, "image/png");
    const types = await checkStreams();
    assert.ok(types[1].includes("file"), `no file chunk in ${types[1]}`);
    const image = await fetch(new URL(drawn.url, BASE), { headers: HEADERS });
    assert.equal(image.status, 200);
    assert.equal(image.headers.get("content-type"), "image/png");
    const stored = await sameAsStored(chat);
    const files = stored.flatMap((m) => m.parts.filter((p) => p.type === "file"));
    assert.equal(files[1].url, drawn.url);
    return { files };
  },
};

const run = scenarios[scenario];
if (!run) throw new Error(`no scenario ${scenario}`);
console.log(JSON.stringify(await run()));
