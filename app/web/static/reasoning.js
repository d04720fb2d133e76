// The playground's Reasoning select: shows the open conversation's `config.reasoning.effort`
// and changes it with a config delta (refused while a run holds the conversation).
import { conversationPath, request } from "./api.js";

const $ = (id) => document.getElementById(id);

// The Reasoning select: the open conversation's `config.reasoning.effort` ("" for the
// provider's default, also when only a budget or a summary is set).
export function showReasoning(config) {
  $("reasoning").value = config.reasoning?.effort ?? "";
}

// The select's `config.reasoning` patch: null resets it to the provider's default.
export function reasoningPatch() {
  const effort = $("reasoning").value;
  return effort ? { effort } : null;
}

export function initReasoning({ state, guarded, setStatus }) {
  $("reasoning").addEventListener("change", () => {
    if (!state.id) return; // a new conversation takes it with its config
    const id = state.id;
    guarded(async () => {
      try {
        const body = { config: { reasoning: reasoningPatch() } };
        const changed = await request("POST", conversationPath(id, "/deltas"), body);
        if (state.id === id) showReasoning(changed.config);
        setStatus(`Reasoning: ${$("reasoning").selectedOptions[0].textContent}.`);
      } catch (error) {
        // not changed (a run holds the conversation, say): show what it still runs with
        const conversation = await request("GET", conversationPath(id));
        if (state.id === id) showReasoning(conversation.config);
        throw error;
      }
    });
  });
}
