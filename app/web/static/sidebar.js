// The playground's sidebar: the conversations (titled, or named by their provider), a search
// box (`?q=`: best match first, each with the words that matched), archived ones on request,
// renaming a conversation in place (PATCH title) and archiving the open one.
import { conversationPath, request } from "./api.js";

const $ = (id) => document.getElementById(id);
let app = null; // { state, open(id), guarded(fn), setStatus(text) } from app.js

export function initSidebar(hooks) {
  app = hooks;
  let typing = null;
  $("search").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => app.guarded(loadConversations), 250);
  });
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(typing);
    app.guarded(loadConversations);
  });
  $("show-archived").addEventListener("change", () => app.guarded(loadConversations));
  $("rename").addEventListener("click", () => {
    const button = document.querySelector(`#conversations button[data-id="${CSS.escape(app.state.id)}"]`);
    if (button) startRename(button);
  });
  $("archive").addEventListener("click", () => app.guarded(toggleArchived));
}

// What a conversation is called: its title, else the title the playground put in its
// metadata when it made it, else its provider and id.
export function label(c) {
  if (c.title) return c.title;
  const title = c.metadata?.title;
  return typeof title === "string" && title ? title : `${c.config.provider || "default"} · ${c.id.slice(0, 8)}`;
}

function listQuery(cursor) {
  const params = new URLSearchParams();
  if (cursor) params.set("cursor", cursor);
  const q = $("search").value.trim();
  if (q) params.set("q", q);
  if ($("show-archived").checked) params.set("archived", "true");
  const query = params.toString();
  return query ? `?${query}` : "";
}

// The conversations, newest first (best match first while searching): as many pages as the
// user asked for with "More conversations" (so the list keeps its length when re-read). Only
// the latest reading is shown: an earlier one answered later (a Restore's, overtaken by
// unticking "Show archived") would put back the list as it was asked for then.
let readings = 0;
export async function loadConversations() {
  const reading = ++readings;
  const items = [];
  let cursor = null;
  for (let n = 0; n < app.state.pages; n++) {
    const page = await request("GET", `/conversations${listQuery(cursor)}`);
    items.push(...page.items);
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  if (reading !== readings) return items;
  const list = $("conversations");
  list.replaceChildren(...items.map(listItem));
  $("more").hidden = !cursor;
  const open = items.find((c) => c.id === app.state.id);
  if (open) showOpen(open);
  return items;
}

function listItem(c) {
  const item = document.createElement("li");
  const button = document.createElement("button");
  button.type = "button";
  button.dataset.id = c.id;
  button.dataset.title = c.title ?? "";
  button.title = "Open (double-click or F2 to rename)";
  const name = document.createElement("span");
  name.className = "name";
  name.dir = "auto";
  name.textContent = `${label(c)} (${c.message_count})`;
  button.append(name);
  if (c.snippet) {
    const snippet = document.createElement("span");
    snippet.className = "snippet";
    snippet.dir = "auto";
    snippet.textContent = c.snippet;
    button.append(snippet);
  }
  button.setAttribute("aria-current", String(c.id === app.state.id));
  button.addEventListener("click", () => app.guarded(() => app.open(c.id)));
  button.addEventListener("dblclick", () => startRename(button));
  button.addEventListener("keydown", (event) => {
    if (event.key === "F2") startRename(button);
  });
  item.append(button);
  return item;
}

// The open conversation's title and Archive / Restore button in the chat's head.
export function showOpen(c) {
  $("conv-name").textContent = label(c);
  $("rename").disabled = false;
  $("archive").disabled = false;
  $("archive").textContent = c.archived ? "Restore" : "Archive";
  $("archive").dataset.archived = String(c.archived);
}

// Rename in place: the button becomes a text box; Enter saves (PATCH), Escape leaves it.
function startRename(button) {
  const id = button.dataset.id;
  const input = document.createElement("input");
  input.type = "text";
  input.maxLength = 200;
  input.value = button.dataset.title;
  input.setAttribute("aria-label", "New title");
  let done = false;
  const finish = (save) => {
    if (done) return;
    done = true;
    const title = input.value.trim();
    if (!save || title === button.dataset.title) {
      input.replaceWith(button);
      button.focus();
      return;
    }
    app.guarded(async () => {
      try {
        const changed = await request("PATCH", conversationPath(id), { title: title || null });
        app.setStatus(changed.title ? `Renamed: ${changed.title}` : "Title cleared.");
      } finally {
        await loadConversations();
      }
    });
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") { event.preventDefault(); finish(true); }
    if (event.key === "Escape") { event.preventDefault(); finish(false); }
  });
  input.addEventListener("blur", () => finish(true));
  button.replaceWith(input);
  input.focus();
  input.select();
}

async function toggleArchived() {
  const archived = $("archive").dataset.archived !== "true";
  const changed = await request("PATCH", conversationPath(app.state.id), { archived });
  showOpen(changed);
  app.setStatus(archived ? "Archived: listed under “Show archived”." : "Restored to the list.");
  await loadConversations();
}

// After a reply, a title made by the server (PARLEY_AUTO_TITLE) lands a moment later: read
// the list again a few times until the open conversation has one.
export async function awaitTitle(id) {
  for (const wait of [300, 1000, 2500]) {
    await new Promise((resolve) => setTimeout(resolve, wait));
    if (app.state.id !== id) return;
    const c = await request("GET", conversationPath(id));
    if (c.title) {
      await loadConversations();
      return;
    }
  }
}
