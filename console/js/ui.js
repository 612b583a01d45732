// Pieces every page uses: a section that loads on its own and shows "no access" when the token
// may not read it (the API's 403: what the token may not read simply is not shown), and the
// confirmation dialog in front of every destructive action.
import { h, add, clear } from "./dom.js";
import { isDenied } from "./api.js";

/** A titled section; `load(body)` fills it. A 403 shows "no access", another error its message. */
export function section(title, load, attrs = {}) {
  const body = h("div", { class: "section-body" }, h("p", { class: "muted" }, "Loading…"));
  const el = h("section", { "aria-label": title, ...attrs }, h("h2", {}, title), body);
  const run = async () => {
    try {
      const content = await load();
      clear(body);
      add(body, [content]);
    } catch (e) {
      clear(body);
      add(body, [failure(e)]);
    }
  };
  el.reload = run;
  run();
  return el;
}

export function failure(e) {
  if (isDenied(e)) return h("p", { class: "muted no-access" }, "No access.");
  return h("p", { class: "error", role: "alert" }, `Could not load: ${e instanceof Error ? e.message : String(e)}`);
}

/**
 * A modal dialog (the native <dialog>: focus stays inside, Escape cancels) asking to confirm.
 * Resolves true when the confirm button is pressed.
 */
export function confirmDialog(title, message, confirmLabel) {
  return new Promise((resolve) => {
    const cancel = h("button", { type: "button" }, "Cancel");
    const ok = h("button", { type: "button", class: "danger" }, confirmLabel);
    const heading = h("h2", { id: "dialog-title" }, title);
    const dlg = h("dialog", { "aria-labelledby": "dialog-title" }, heading, h("p", {}, message), h("div", { class: "actions" }, cancel, ok));
    let answer = false;
    ok.addEventListener("click", () => {
      answer = true;
      dlg.close();
    });
    cancel.addEventListener("click", () => dlg.close());
    dlg.addEventListener("close", () => {
      dlg.remove();
      resolve(answer);
    });
    document.body.append(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

/** Runs an action from a button: the button is disabled meanwhile, the outcome announced in `status`. */
export async function act(button, status, work, done) {
  button.disabled = true;
  status.textContent = "Working…";
  try {
    await work();
    status.textContent = done;
  } catch (e) {
    status.textContent = isDenied(e) ? "Not allowed for this token." : `Failed: ${e instanceof Error ? e.message : String(e)}`;
  } finally {
    button.disabled = false;
  }
}

export function statusLine() {
  return h("p", { class: "status", role: "status", "aria-live": "polite" });
}
