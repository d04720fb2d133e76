// The playground: conversations, streaming, Stop, injected messages, client-tool results,
// export. Talks to Parley only through api.js; renders the stored transcript after each run.
import { ApiError, AuthRequired, apiKey, request, streamRun } from "./api.js";

const $ = (id) => document.getElementById(id);
const state = { id: null, running: false };

function setStatus(text) { $("status").textContent = text; }

function setRunning(running) {
  state.running = running;
  $("send").disabled = running || !state.id;
  $("stop").disabled = !running;
}

function askKey() {
  return new Promise((resolve) => {
    const dialog = $("key-dialog");
    $("key").value = "";
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
      await askKey();
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
  const who = document.createElement("span");
  who.className = "who";
  who.textContent = role;
  div.append(who, document.createTextNode(text));
  $("transcript").append(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

function renderMessage(message) {
  if (message.type === "ToolCallMessage") {
    const outcome = message.pending ? "waiting for the client's result"
      : message.error != null ? `error: ${message.error}` : JSON.stringify(message.result);
    return bubble("tool", `${message.tool_name}(${JSON.stringify(message.arguments)}) → ${outcome}`);
  }
  const div = bubble(message.role, message.text ?? "");
  if (message.incomplete) {
    div.classList.add("incomplete");
    const cut = document.createElement("span");
    cut.className = "cut";
    cut.textContent = " (cut short)";
    div.append(cut);
  }
  return div;
}

async function showTranscript() {
  const doc = await request("GET", `/conversations/${state.id}/messages`);
  $("transcript").replaceChildren();
  doc.messages.forEach(renderMessage);
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

function onEvent(live) {
  return (name, payload) => {
    if (name === "content_block_delta" && typeof payload.delta === "string") {
      if (!live.div) live.div = bubble("assistant", "", "streaming");
      live.div.append(document.createTextNode(payload.delta));
    } else if (name === "message") {
      live.div?.remove();
      live.div = null;
      renderMessage(payload.message);
    } else if (name === "requires_action") {
      live.toolCalls = payload.tool_calls;
    } else if (name === "error") {
      setStatus(`Error (${payload.code}): ${payload.detail}`);
    } else if (name === "reconnecting") {
      setStatus(`Connection lost; resuming (try ${payload.attempt})…`);
    }
  };
}

async function run(bundle) {
  setRunning(true);
  setStatus("Running…");
  $("tool-form").hidden = true;
  const live = { div: null, toolCalls: null };
  try {
    const done = await withKey(() => streamRun(state.id, bundle, onEvent(live)));
    live.div?.remove();
    await showTranscript();
    setStatus(done ? `Done: ${done.status}` : "The stream ended before the run was done.");
    if (done?.status === "requires_action" && live.toolCalls) showToolForm(live.toolCalls);
  } catch (error) {
    live.div?.classList.remove("streaming");
    setStatus(error instanceof ApiError ? `Error ${error.status}: ${error.message}` : String(error));
  } finally {
    setRunning(false);
    await guarded(loadConversations);
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

async function loadConversations() {
  const page = await request("GET", "/conversations");
  const list = $("conversations");
  list.replaceChildren();
  for (const c of page.items) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    const label = c.metadata.title || `${c.config.provider || "default"} · ${c.id.slice(0, 8)}`;
    button.textContent = `${label} (${c.message_count})`;
    button.setAttribute("aria-current", String(c.id === state.id));
    button.addEventListener("click", () => guarded(() => open(c.id)));
    item.append(button);
    list.append(item);
  }
}

async function open(id) {
  state.id = id;
  $("title").textContent = `Conversation ${id}`;
  $("export").disabled = false;
  $("tool-form").hidden = true;
  setRunning(false);
  setStatus("");
  await showTranscript();
  await loadConversations();
}

function newConversationBody() {
  const config = { provider: $("provider").value };
  if ($("model").value.trim()) config.model = $("model").value.trim();
  if ($("server-tools").checked) config.tools = ["add_numbers", "current_time"];
  const clientTools = $("client-tools").value.trim();
  if (clientTools) config.client_tools = JSON.parse(clientTools);
  const body = { config, metadata: { title: `${config.provider} · ${new Date().toLocaleTimeString()}` } };
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

$("send-form").addEventListener("submit", (event) => {
  event.preventDefault();
  if (!state.id || state.running) return;
  const text = $("message").value;
  const role = $("role").value;
  $("message").value = "";
  if (role === "assistant") {
    guarded(async () => {
      await request("POST", `/conversations/${state.id}/deltas`, { messages: [{ role, text }] });
      await showTranscript();
      setStatus("Assistant message added.");
    });
  } else {
    run(text.trim() ? { messages: [{ role: "user", text }] } : undefined);
  }
});

$("stop").addEventListener("click", () => {
  setStatus("Stopping…");
  guarded(() => request("POST", `/conversations/${state.id}/cancel`));
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

$("export").addEventListener("click", () => guarded(async () => {
  const doc = await request("GET", `/conversations/${state.id}/messages`);
  const blob = new Blob([JSON.stringify(doc, null, 2)], { type: "application/json" });
  const link = document.createElement("a");
  link.href = URL.createObjectURL(blob);
  link.download = `conversation-${state.id}.json`;
  link.click();
  URL.revokeObjectURL(link.href);
}));

guarded(async () => {
  await loadProviders();
  await loadConversations();
});
