// One certificate: GET <mount>/cert/<serial> (Vault API: /pki/cert/:serial) gives the PEM; the
// page reads subject, SANs, issuer and validity from it (./der.js), offers the PEM as a download
// and revokes it (POST <mount>/revoke, Vault API: /pki/revoke) after a confirmation.
import { h, add, clear, facts, link, relative, when } from "./dom.js";
import { get, post, p } from "./api.js";
import { parseCertificate } from "./der.js";
import { confirmDialog, failure, statusLine, act } from "./ui.js";

function pemDownload(serial, pem) {
  const a = h("a", { download: `${serial.replaceAll(":", "-")}.pem`, class: "button" }, "Download PEM");
  a.href = URL.createObjectURL(new Blob([pem], { type: "application/x-pem-file" }));
  return a;
}

function details(mount, serial, d) {
  const f = parseCertificate(d.certificate);
  const revokedAt = Number(d.revocation_time ?? 0);
  const revoked = revokedAt > 0 || Boolean(d.revocation_time_rfc3339);
  const expired = f.notAfter < Date.now();
  const state = revoked ? `Revoked ${d.revocation_time_rfc3339 || when(revokedAt * 1000)}` : expired ? "Expired" : "Valid";
  const el = h(
    "div",
    {},
    facts([
      ["Subject", f.subject || "(empty)"],
      ["Subject alternative names", f.sans.length ? h("ul", { class: "plain" }, f.sans.map((s) => h("li", {}, s))) : "none"],
      ["Issuer", f.issuer],
      ["Serial", serial],
      ["Not before", when(f.notBefore)],
      ["Not after", `${when(f.notAfter)} (${relative(f.notAfter)})`],
      ["Public key", f.key],
      ["Status", h("span", { class: "cert-status" }, state)],
    ]),
    h("details", {}, h("summary", {}, "PEM"), h("pre", { class: "pem" }, d.certificate)),
    h("p", {}, pemDownload(serial, d.certificate)),
  );
  return { el, revoked };
}

export function renderCert(mount, serial) {
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const page = h("div", { class: "page" }, h("p", {}, link(["pki", mount], `← PKI mount ${mount}`)), h("h1", {}, "Certificate"), body);
  const load = async () => {
    clear(body);
    try {
      const d = (await get(p(mount, "cert", serial.replaceAll(":", "-")))).data;
      const view = details(mount, serial, d);
      add(body, [view.el]);
      if (!view.revoked) add(body, [revokeControl(mount, serial, load)]);
    } catch (e) {
      add(body, [failure(e)]);
    }
  };
  load();
  return page;
}

function revokeControl(mount, serial, reload) {
  const status = statusLine();
  const button = h("button", { type: "button", class: "danger" }, "Revoke");
  button.addEventListener("click", async () => {
    const yes = await confirmDialog("Revoke this certificate?", `Serial ${serial} will be listed on the CRL and reported revoked by OCSP. This cannot be undone.`, "Revoke certificate");
    if (!yes) {
      status.textContent = "Not revoked.";
      return;
    }
    await act(button, status, () => post(p(mount, "revoke"), { serial_number: serial }), "Revoked.");
    if (status.textContent === "Revoked.") await reload();
  });
  return h("section", { "aria-label": "Revocation" }, h("h2", {}, "Revocation"), button, status);
}
