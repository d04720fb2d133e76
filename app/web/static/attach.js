// Attachments in the playground: files picked with the button, pasted or dropped wait as chips
// under the message box, are uploaded (POST /files) when the message is sent and go with it by
// id; a message's attachments show as thumbnails (images) or named chips (PDFs, text) that open
// the file's content. Images are fetched with the API key, as object URLs (an <img src> sends
// no Authorization header).
import { fileContent, uploadFile } from "./api.js";

const pending = [];
const IMAGE = /^image\/(png|jpeg|gif|webp)$/;
const ACCEPT = "image/png,image/jpeg,image/gif,image/webp,application/pdf,text/plain,text/markdown,text/csv,.md,.csv,.txt";

function sizeText(size) {
  if (size >= 1e6) return `${(size / 1e6).toFixed(1)} MB`;
  if (size >= 1e3) return `${Math.round(size / 1e3)} KB`;
  return `${size} B`;
}

let list = null;

function renderPending() {
  list.replaceChildren();
  pending.forEach((file, i) => {
    const chip = document.createElement("span");
    chip.className = "chip pending";
    if (IMAGE.test(file.type)) {
      const img = document.createElement("img");
      img.className = "thumb";
      img.alt = file.name;
      img.src = URL.createObjectURL(file);
      chip.append(img);
    }
    chip.append(document.createTextNode(`${file.name || "pasted"} (${sizeText(file.size)})`));
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "remove";
    remove.textContent = "×";
    remove.setAttribute("aria-label", `Remove ${file.name || "the pasted file"}`);
    remove.addEventListener("click", () => { pending.splice(i, 1); renderPending(); });
    chip.append(remove);
    list.append(chip);
  });
  list.hidden = pending.length === 0;
}

export function addFiles(files) {
  for (const file of files) pending.push(file);
  renderPending();
}

export function hasPending() { return pending.length > 0; }

// Upload the files waiting to be sent; the message's `attachments`. The chips stay until the
// message is sent (`clearPending`), so a refused upload loses nothing.
export async function uploadPending() {
  const refs = [];
  for (const file of pending) {
    const stored = await uploadFile(file, file.name || "pasted.png");
    refs.push({ file_id: stored.id });
  }
  return refs;
}

export function clearPending() {
  pending.splice(0, pending.length);
  renderPending();
}

// The attach button, paste into the message box and drop on the conversation.
export function initAttach({ button, input, box, zone, chips }) {
  list = chips;
  input.accept = ACCEPT;
  button.addEventListener("click", () => input.click());
  input.addEventListener("change", () => { addFiles(input.files); input.value = ""; });
  box.addEventListener("paste", (event) => {
    const files = [...(event.clipboardData?.files ?? [])];
    if (files.length) {
      event.preventDefault();
      addFiles(files);
    }
  });
  zone.addEventListener("dragover", (event) => {
    if (event.dataTransfer?.types.includes("Files")) {
      event.preventDefault();
      zone.classList.add("dropping");
    }
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("dropping"));
  zone.addEventListener("drop", (event) => {
    zone.classList.remove("dropping");
    const files = [...(event.dataTransfer?.files ?? [])];
    if (files.length) {
      event.preventDefault();
      addFiles(files);
    }
  });
  renderPending();
}

// A message's attachments under its text: image thumbnails, other files as named chips; each
// opens the file's content.
export function renderAttachments(div, attachments) {
  if (!attachments?.length) return;
  const row = document.createElement("div");
  row.className = "attachments";
  for (const a of attachments) {
    const link = document.createElement("a");
    link.className = IMAGE.test(a.media_type) ? "attachment image" : "chip attachment";
    link.href = "#";
    link.dataset.fileId = a.file_id;
    link.title = `${a.name} (${a.media_type}, ${sizeText(a.size)})`;
    if (IMAGE.test(a.media_type)) {
      const img = document.createElement("img");
      img.className = "thumb";
      img.alt = a.name;
      fileContent(a.file_id).then((blob) => { img.src = URL.createObjectURL(blob); })
        .catch(() => { img.alt = `${a.name} (not available)`; });
      link.append(img);
    } else {
      link.textContent = `📄 ${a.name} (${sizeText(a.size)})`;
    }
    link.addEventListener("click", async (event) => {
      event.preventDefault();
      const blob = await fileContent(a.file_id);
      window.open(URL.createObjectURL(blob), "_blank", "noopener");
    });
    row.append(link);
  }
  div.append(row);
}

// An image block of a reply being streamed (`content_block_start` of type `image`).
export function streamedImage(div, payload) {
  renderAttachments(div, [{ file_id: payload.file_id, media_type: payload.media_type,
    name: "image", size: 0 }]);
}
