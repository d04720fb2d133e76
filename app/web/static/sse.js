// Server-Sent Events parsing for a fetch() body: no EventSource, so requests can carry headers.
// parseSSE(readable) yields {event, data, id} for each dispatched event (WHATWG rules, reduced:
// "event", "data" (joined by "\n"), "id"; comment lines and "retry" are ignored).

export async function* parseSSE(readable) {
  const reader = readable.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let event = { event: "message", data: [], id: null };
  let afterCR = false; // the last chunk ended in "\r": a "\n" starting the next one ends no line
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += afterCR && value.startsWith("\n") ? value.slice(1) : value;
      if (value) afterCR = value.endsWith("\r");
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop();
      for (const line of lines) {
        if (line === "") {
          if (event.data.length) {
            yield { event: event.event, data: event.data.join("\n"), id: event.id };
          }
          event = { event: "message", data: [], id: null };
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "event") event.event = val;
        else if (field === "data") event.data.push(val);
        else if (field === "id") event.id = val;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
