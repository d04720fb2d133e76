// The playground: conversations (the sidebar: sidebar.js), streaming, Stop, injected messages, client-tool results,
// export. Talks to Parley only through api.js; renders the stored transcript after each run.
import {
  ApiError, AuthRequired, apiKey, conversationPath, request, requestText, streamRun,
} from "./api.js";
import {
  clearPending, hasPending, initAttach, renderAttachments, streamedImage, uploadPending,
} from "./attach.js";
import { initReasoning, reasoningPatch, showReasoning } from "./reasoning.js";
import { awaitTitle, initSidebar, loadConversations, showOpen } from "./sidebar.js";

const $ = (id) => document.getElementById(id);
// `stream`: the AbortController of the reader following a run in this tab (null: none). Opening
// another conversation aborts it, which only detaches the reader: the run goes on.
// `opened`: settles once the open conversation's transcript is shown; a send waits for it (showing
// the transcript would take a reply that began streaming meanwhile off the page).
const state = { id: null, running: false, stream: null, pages: 1, opened: Promise.resolve() };

function setStatus(text) { $("status").textContent = text; }

function setRunning(running) {
  state.running = running;
  $("send").disabled = running || !state.id;
  $("stop").disabled = !running;
  $("reasoning").disabled = running; // a run holds the conversation: its config cannot change
}

function askKey(refused) {
  return new Promise((resolve) => {
    const dialog = $("key-dialog");
    $("key").value = "";
    $("key-error").textContent = refused ? "The server refused that key; try another." : "";
    dialog.addEventListener("close", () => {
      apiKey.set($("key").value.trim());
      resolve();
    }, { once: true });
    dialog.showModal();
  });
}

// Run fn; when the server wants a key, ask for one and try again.
async function withKey(fn) {
  for (;;) {
    try {
      return await fn();
    } catch (error) {
      if (!(error instanceof AuthRequired)) throw error;
      await askKey(Boolean(apiKey.get()));
    }
  }
}

async function guarded(fn) {
  try {
    return await withKey(fn);
  } catch (error) {
    setStatus(error instanceof ApiError ? `Error ${error.status}: ${error.message}` : String(error));
    return undefined;
  }
}

function bubble(role, text, extra = "") {
  const div = document.createElement("div");
  div.className = `msg ${role} ${extra}`.trim();
  div.dir = "auto"; // right to left when the text is (the label below does not count)
  const who = document.createElement("span");
  who.className = "who";
  who.dir = "ltr";
  who.textContent = role;
  div.append(who, document.createTextNode(text));
  $("transcript").append(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

// The model's reasoning, collapsed above its reply (a <details> the user opens).
function reasoningBlock(text, extra = "") {
  const details = document.createElement("details");
  details.className = `msg reasoning ${extra}`.trim();
  const summary = document.createElement("summary");
  summary.textContent = "Reasoning";
  const thought = document.createElement("div");
  thought.className = "thought";
  thought.dir = "auto";
  thought.textContent = text;
  details.append(summary, thought);
  $("transcript").append(details);
  details.scrollIntoView({ block: "end" });
  return details;
}

function markCut(div) {
  div.classList.add("incomplete");
  const cut = document.createElement("span");
  cut.className = "cut";
  cut.textContent = " (cut short)";
  (div.querySelector("summary") ?? div).append(cut);
}

function renderMessage(message) {
  if (message.type === "ReasoningMessage") {
    const details = reasoningBlock(message.text ?? "");
    if (message.incomplete) markCut(details);
    return details;
  }
  if (message.type === "ToolCallMessage") {
    const outcome = message.pending ? "waiting for the client's result"
      : message.error != null ? `error: ${message.error}` : JSON.stringify(message.result);
    return bubble("tool", `${message.tool_name}(${JSON.stringify(message.arguments)}) → ${outcome}`);
  }
  const div = bubble(message.role, message.text ?? "");
  renderAttachments(div, message.attachments);
  if (message.incomplete) markCut(div);
  return div;
}

// The stored transcript; a form for the results of client tool calls still pending (also
// after a reload or from another tab).
async function showTranscript() {
  const doc = await request("GET", conversationPath(state.id, "/messages"));
  $("transcript").replaceChildren();
  doc.messages.forEach(renderMessage);
  const pending = doc.messages.filter((m) => m.type === "ToolCallMessage" && m.pending);
  if (pending.length && !state.running) showToolForm(pending);
  else $("tool-form").hidden = true;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// showTranscript, tried again while the network is down (as long as a resume would be).
async function rereadTranscript() {
  for (let attempt = 0; ; attempt++) {
    try {
      return await showTranscript();
    } catch (error) {
      if (error instanceof ApiError || error instanceof AuthRequired || attempt >= 10) throw error;
      await sleep(Math.min(250 * 2 ** attempt, 4000));
    }
  }
}

function showToolForm(toolCalls) {
  const fields = $("tool-fields");
  fields.replaceChildren();
  for (const call of toolCalls) {
    const label = document.createElement("label");
    label.textContent = `Result of ${call.tool_name}(${JSON.stringify(call.arguments)})`;
    const input = document.createElement("input");
    input.dataset.toolCallId = call.tool_call_id;
    label.append(input);
    fields.append(label);
  }
  $("tool-form").hidden = false;
}

// A run's events as they arrive: the reply's text in a streaming bubble, its reasoning (the
// blocks that `content_block_start` types `reasoning`) in a streaming <details>; each is
// replaced by the stored message when its `message` event comes.
function onEvent(live) {
  return (name, payload) => {
    if (name === "run_started") {
      live.started = true;
    } else if (name === "content_block_start") {
      if (payload.type === "reasoning") live.reasoningBlocks.add(payload.index);
      else live.reasoningBlocks.delete(payload.index);
      if (payload.type === "image") { // an image the model made, already stored
        if (!live.div) live.div = bubble("assistant", "", "streaming");
        streamedImage(live.div, payload);
      }
    } else if (name === "content_block_delta" && typeof payload.delta === "string") {
      if (live.reasoningBlocks.has(payload.index)) {
        if (!live.reasoning) live.reasoning = reasoningBlock("", "streaming");
        live.reasoning.querySelector(".thought").append(document.createTextNode(payload.delta));
      } else {
        if (!live.div) live.div = bubble("assistant", "", "streaming");
        live.div.append(document.createTextNode(payload.delta));
      }
    } else if (name === "message") {
      const part = payload.message.type === "ReasoningMessage" ? "reasoning" : "div";
      live[part]?.remove();
      live[part] = null;
      renderMessage(payload.message);
    } else if (name === "error") {
      setStatus(`Error (${payload.code}): ${payload.detail}`);
      $("run-error").textContent = `Error (${payload.code}): ${payload.detail}`;
    } else if (name === "reconnecting") {
      setStatus(`Connection lost; resuming (try ${payload.attempt})…`);
    }
  };
}

// Stream a run of the open conversation: a new one (`bundle`, or none to run the conversation
// as it is), or with `lastEventId` the one already running. `text` is put back in the message
// box if the run could not start.
async function run(bundle, { lastEventId = null, text = "" } = {}) {
  state.stream?.abort();
  const controller = new AbortController();
  state.stream = controller;
  const mine = () => state.stream === controller;
  setRunning(true);
  setStatus(lastEventId ? "Running (following the reply)…" : "Running…");
  $("run-error").textContent = "";
  const toolForm = !$("tool-form").hidden; // shown again if the run does not start
  $("tool-form").hidden = true;
  const live = { div: null, reasoning: null, reasoningBlocks: new Set(), started: false };
  const sent = bundle?.messages?.filter((m) => m.role === "user") ?? [];
  sent.forEach((m) => bubble("user", m.text, "sending"));
  try {
    const done = await withKey(() => streamRun(state.id, bundle, onEvent(live),
      { signal: controller.signal, lastEventId }));
    if (!mine()) return;
    state.running = false;
    if (done) setStatus(`Done: ${done.status}; reading the stored transcript…`);
    await rereadTranscript(); // replaces the streamed text with the stored reply
    if (!mine()) return;
    if (done) setStatus(`Done: ${done.status}`);
    else setStatus(lastEventId && !live.started ? "" : "The stream ended before the run was done.");
  } catch (error) {
    if (!mine()) return;
    live.div?.classList.remove("streaming");
    live.reasoning?.classList.remove("streaming");
    if (!live.started) {
      document.querySelectorAll(".msg.sending").forEach((div) => div.remove());
      if (text && !$("message").value) $("message").value = text;
      $("tool-form").hidden = !toolForm; // the calls still wait for their results
    }
    setStatus(error instanceof ApiError ? `Error ${error.status}: ${error.message}` : String(error));
  } finally {
    if (mine()) {
      state.stream = null;
      setRunning(false);
      if (document.activeElement === document.body) $("message").focus();
      const items = await guarded(loadConversations);
      const open = items?.find((c) => c.id === state.id);
      if (open && !open.title) guarded(() => awaitTitle(open.id));
    }
  }
}

async function loadProviders() {
  const data = await request("GET", "/providers");
  const select = $("provider");
  select.replaceChildren();
  for (const p of data.providers) {
    const option = new Option(`${p.name} (${p.default_model})`, p.name);
    option.dataset.model = p.default_model;
    option.selected = p.name === data.default_provider;
    select.append(option);
  }
}

// Show a conversation (its id kept in the address, so a reload comes back to it); a run
// going on there, started in this tab before, in another tab or before a reload, is followed.
async function open(id) {
  state.stream?.abort();
  state.stream = null;
  state.id = id;
  history.replaceState(null, "", `#${encodeURIComponent(id)}`);
  $("title").textContent = `Conversation ${id}`;
  $("export").disabled = false;
  $("tool-form").hidden = true;
  $("run-error").textContent = "";
  setRunning(false);
  setStatus("");
  let shown;
  state.opened = new Promise((resolve) => { shown = resolve; });
  let conversation;
  try {
    conversation = await request("GET", conversationPath(id));
    showOpen(conversation);
    showReasoning(conversation.config);
    await showTranscript();
  } finally {
    shown();
  }
  await loadConversations();
  if (conversation.status === "running" && conversation.run_id && state.id === id && !state.running) {
    run(undefined, { lastEventId: `${conversation.run_id}:0` });
  }
}

function newConversationBody() {
  // No provider chosen yet (the list still loading, a click right after the page opened): the
  // server's default, not an empty name it would refuse.
  const provider = $("provider").value;
  const config = provider ? { provider } : {};
  if (reasoningPatch()) config.reasoning = reasoningPatch();
  if ($("model").value.trim()) config.model = $("model").value.trim();
  if ($("server-tools").checked) config.tools = ["add_numbers", "current_time"];
  if ($("image-tool").checked) config.tools = [...(config.tools ?? []), "image_generation"];
  const clientTools = $("client-tools").value.trim();
  if (clientTools) config.client_tools = JSON.parse(clientTools);
  const body = { config, metadata: { title: `${provider || "default"} · ${new Date().toLocaleTimeString()}` } };
  if ($("system-prompt").value.trim()) body.system_prompt = $("system-prompt").value.trim();
  return body;
}

$("new-form").addEventListener("submit", (event) => {
  event.preventDefault();
  guarded(async () => {
    const created = await request("POST", "/conversations", newConversationBody());
    await open(created.id);
  });
});

$("send-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const id = state.id;
  await state.opened;
  if (!id || id !== state.id || state.running) return;
  const text = $("message").value;
  const role = $("role").value;
  $("message").value = "";
  if (role === "assistant") {
    if (!text.trim()) {
      setStatus("Type the assistant message to add.");
      return;
    }
    guarded(async () => {
      try {
        await request("POST", conversationPath(state.id, "/deltas"), { messages: [{ role, text }] });
      } catch (error) {
        // not added: keep what was typed (a key asked for tries again)
        if (!(error instanceof AuthRequired) && !$("message").value) $("message").value = text;
        throw error;
      }
      await showTranscript();
      setStatus("Assistant message added.");
    });
  } else {
    sendUser(text);
  }
});

// A user message with the files waiting to go with it (uploaded first: a refused upload keeps
// the text and the files, and starts no run); nothing typed and no files runs the conversation.
async function sendUser(text) {
  let attachments = [];
  if (hasPending()) {
    setStatus("Uploading…");
    attachments = await guarded(uploadPending);
    if (attachments === undefined) {
      if (!$("message").value) $("message").value = text;
      return;
    }
    clearPending();
  }
  const message = { role: "user", text };
  if (attachments.length) message.attachments = attachments;
  run(text.trim() || attachments.length ? { messages: [message] } : undefined, { text });
}

// Enter sends what was typed; Shift+Enter makes a new line. (Running the conversation as it
// is, with nothing typed, takes the Send button.)
$("message").addEventListener("keydown", (event) => {
  if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
  event.preventDefault();
  if ($("message").value.trim() || hasPending()) $("send-form").requestSubmit();
});

$("stop").addEventListener("click", () => {
  setStatus("Stopping…");
  guarded(() => request("POST", conversationPath(state.id, "/cancel")));
});

$("tool-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const messages = [...$("tool-fields").querySelectorAll("input")].map((input) => {
    let result = input.value;
    try { result = JSON.parse(result); } catch { /* plain text result */ }
    return { role: "tool", tool_call_id: input.dataset.toolCallId, result };
  });
  run({ messages });
});

$("more").addEventListener("click", () => {
  state.pages += 1;
  guarded(loadConversations);
});

$("export").addEventListener("click", () => guarded(async () => {
  // the document as served, byte for byte: numbers are not rounded through JavaScript's
  const doc = await requestText(conversationPath(state.id, "/messages"));
  const blob = new Blob([doc], { type: "application/json" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = `conversation-${state.id}.json`;
  link.click();
  URL.revokeObjectURL(link.href);
}));

// Open the conversation the address names (`/#<id>`): at start, and when the address changes
// without a reload (an edited or followed link to `/#<other id>`).
async function openFromAddress() {
  if (location.hash.length <= 1) return;
  try {
    const id = decodeURIComponent(location.hash.slice(1));
    if (id !== state.id) await open(id);
  } catch (error) {
    // an id that names no conversation (or is no id: "#%E0"): show none
    if (!(error instanceof ApiError || error instanceof URIError)) throw error;
    history.replaceState(null, "", location.pathname);
    state.id = null;
    $("title").textContent = "No conversation yet: create one.";
    $("conv-name").textContent = "";
    $("export").disabled = true;
    $("rename").disabled = true;
    $("archive").disabled = true;
    $("transcript").replaceChildren();
    setRunning(false);
  }
}

window.addEventListener("hashchange", () => guarded(openFromAddress));

initAttach({ button: $("attach"), input: $("attach-input"), box: $("message"), zone: $("chat"),
  chips: $("chips") });
initSidebar({ state, open, guarded, setStatus });
initReasoning({ state, guarded, setStatus });

guarded(async () => {
  await loadProviders();
  await loadConversations();
  await openFromAddress();
});
