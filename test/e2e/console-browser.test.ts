/**
 * The console at /ui/ (docs/console.md) in a real browser: Debian's chromium driven by
 * playwright-core (no browser download), one launch and one page, against the e2e Worker. It
 * walks docs/console.md section by section, in the doc's order, and writes the doc's screenshots
 * (docs/console/*.png) as it goes, so the pictures show what the console really does. Along the
 * way: the CSP header, no request to any other host, sign-in and the namespace, the PKI pages
 * (issuer tree, chart, search by common name and by SAN, paging through 250 certificates),
 * revoking from the UI and `openssl ocsp` then saying revoked, a failing sync association that
 * turns from error to synced once the fake provider recovers, KV values shown only on request,
 * a script in a certificate's common name and in a KV path shown as text and never run, and a
 * token that may read one PKI mount seeing exactly that.
 */
import { mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { openssl, withFiles } from "../helpers/openssl";
import { E2E_ROOT_TOKEN } from "./env";
import { CERT_COUNT, KV, NS, OTHER_PKI, PKI, SCRIPT_CN, SCRIPT_KV, associationStatus, must, seed, seedSync, type Seeded } from "./console-setup";

const ROOT_DIR = path.resolve(import.meta.dirname, "../..");
const SHOTS = path.join(ROOT_DIR, "docs/console");
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/** expect.poll with room for a loaded CI machine (Vitest's default gives up after 1 s). */
const poll = <T>(fn: () => T | Promise<T>, opts: { timeout?: number } = {}) => expect.poll(fn, { timeout: opts.timeout ?? 15_000, interval: 50 });

let browser: Browser;
let page: Page;
let data: Seeded;
const foreignRequests: string[] = [];
const dialogs: string[] = [];
const shots: string[] = [];

beforeAll(async () => {
  const [seeded] = await Promise.all([seed(), mkdir(SHOTS, { recursive: true })]);
  data = seeded;
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
  page = await browser.newPage({ viewport: { width: 1000, height: 700 } });
  const origin = new URL(inject("baseUrl")).origin;
  page.on("request", (r) => {
    const u = r.url();
    if (!u.startsWith(`${origin}/`) && !u.startsWith("blob:") && !u.startsWith("data:")) foreignRequests.push(u);
  });
  // The page itself never opens an alert; an injected script would (or set window.__injected).
  page.on("dialog", (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
});

/** A screenshot for docs/console.md: the file name is the doc's picture, in the doc's order. */
async function shot(name: string) {
  shots.push(`console/${name}.png`);
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: false, animations: "disabled", caret: "hide" });
}

const ui = () => `${inject("baseUrl")}/ui/`;

async function signIn(token: string, ns: string) {
  await page.getByLabel("Token").fill(token);
  await page.getByLabel("Namespace (optional)").fill(ns);
  await page.getByRole("button", { name: "Sign in" }).click();
  await poll(() => page.getByRole("button", { name: "Sign out" }).count()).toBe(1);
}

/**
 * Form controls and buttons of the page that have no accessible name (no label, no text, no
 * aria-label), described by tag and id. Run as page script text: the DOM is the browser's.
 */
async function unnamedControls(): Promise<string[]> {
  return page.evaluate(`Array.from(document.querySelectorAll("input, select, button, a, [role=img]"))
    .filter((el) => !(el.labels && el.labels.length > 0) && !el.getAttribute("aria-label") && !(el.textContent || "").trim())
    .map((el) => el.tagName + "#" + el.id)`);
}

async function tableRows(): Promise<string[][]> {
  return page.locator("section[aria-label=Certificates] tbody tr").evaluateAll((rows: { querySelectorAll(s: string): ArrayLike<{ textContent: string | null }> }[]) => rows.map((r) => Array.from(r.querySelectorAll("td"), (td) => td.textContent ?? "")));
}

it("walks docs/console.md in Chromium: every page, every action, the pictures", async () => {
  await signInStep();
  await pkiStep();
  await searchStep();
  await pagingStep();
  await certStep();
  await syncStep();
  await kvStep();
  await limitedStep();
  // Nothing ran, nothing left for another host; the doc shows these pictures in this order.
  expect(await page.evaluate(() => (globalThis as { __injected?: number }).__injected)).toBeUndefined();
  expect(dialogs).toEqual([]);
  expect(foreignRequests).toEqual([]);
  const doc = await readFile(path.join(ROOT_DIR, "docs/console.md"), "utf8");
  expect([...doc.matchAll(/!\[[^\]]*\]\((console\/[\w-]+\.png)\)/g)].map((m) => m[1])).toEqual(shots);
}, 180_000);

/** Sign in (with the namespace), then the overview. */
async function signInStep() {
  const res = await page.goto(ui());
  expect(res?.headers()["content-security-policy"]).toBe(CSP);
  expect(res?.headers()["x-content-type-options"]).toBe("nosniff");
  await poll(() => page.getByLabel("Token").count()).toBe(1);
  await shot("sign-in");
  await signIn(E2E_ROOT_TOKEN, NS);
  await poll(() => page.getByRole("heading", { name: "Overview" }).count()).toBe(1);
  await poll(() => page.locator("section[aria-label='Secrets engines'] tbody tr").count()).toBeGreaterThanOrEqual(3);
  await poll(() => page.getByText("Unsealed").count()).toBe(1);
  await shot("overview");
}

/** A PKI mount: the issuer tree, the chart, the inventory's first page. */
async function pkiStep() {
  await page.getByRole("link", { name: `PKI: ${PKI}`, exact: true }).click();
  const tree = page.getByRole("list", { name: "Issuer hierarchy" });
  await poll(() => tree.locator(":scope > li > ul > li").count()).toBe(1);
  expect(await tree.locator(":scope > li > .issuer").textContent()).toContain("CN=Console Demo Root");
  expect(await tree.locator(":scope > li > ul > li .issuer").textContent()).toContain("CN=Console Demo Root Issuing CA");
  const chart = page.getByRole("img", { name: "Certificates expiring per day" });
  await poll(() => chart.count()).toBe(1);
  await poll(() => chart.locator("rect").count()).toBeGreaterThan(30);
  const headers = await page.locator("section[aria-label=Certificates] thead th").allTextContents();
  expect(headers).toEqual(["Common name", "Serial", "Not after", "Status"]);
  await poll(async () => (await tableRows()).length).toBe(50);
  expect(await unnamedControls()).toEqual([]);
  await shot("pki-mount");
}

/** Search by common name, then by a SAN that is not the common name. */
async function searchStep() {
  const search = page.getByLabel("Search certificates");
  await search.fill("host-042");
  await search.press("Enter");
  await poll(async () => (await tableRows()).map((r) => r[0])).toEqual([expect.stringContaining("host-042.demo.example")]);
  await search.fill(data.sanOnly.san);
  await search.press("Enter");
  await poll(async () => (await tableRows()).map((r) => r[1])).toEqual([data.sanOnly.serial]);
  // alias-24 and alias-240 … alias-249: SANs only.
  await search.fill("alias-24");
  await search.press("Enter");
  await poll(async () => (await tableRows()).length).toBe(11);
  await page.locator("section[aria-label=Certificates] h2").evaluate((el: { scrollIntoView(): void }) => el.scrollIntoView());
  await shot("search");
}

/** Next through every page: each stored certificate once (the 250 leaves among them); Previous goes back. */
async function pagingStep() {
  const search = page.getByLabel("Search certificates");
  await search.fill("");
  await search.press("Enter");
  const seen = new Set<string>();
  let pages = 0;
  for (; pages < 10; pages++) {
    await poll(async () => page.getByRole("status").filter({ hasText: `Page ${pages + 1}:` }).count()).toBe(1);
    for (const r of await tableRows()) seen.add(r[1] ?? "");
    const next = page.getByRole("button", { name: "Next" });
    if (await next.isDisabled()) break;
    await next.click();
  }
  // Every stored certificate once: the 250 leaves, the two others, and the mount's CA certificates
  // (the root and the intermediate it signed are stored too, as in Vault).
  const total = (await must("GET", `${PKI}/certs/counts`)).body.data.total as number;
  expect(total).toBe(CERT_COUNT + 2 + 2);
  expect(pages + 1).toBe(Math.ceil(total / 50));
  expect(seen.size).toBe(total);
  for (const serial of [...data.leaves.keys(), data.scriptSerial, data.sanOnly.serial]) expect(seen.has(serial), serial).toBe(true);
  await page.getByRole("button", { name: "Previous" }).click();
  await poll(async () => page.getByRole("status").filter({ hasText: `Page ${pages}:` }).count()).toBe(1);
}

/** The certificate with a script in its common name: shown as text; revoked from the UI; OCSP agrees. */
async function certStep() {
  const search = page.getByLabel("Search certificates");
  await search.fill("script.demo.example");
  await search.press("Enter");
  await poll(async () => (await tableRows()).map((r) => r[1])).toEqual([data.scriptSerial]);
  expect((await tableRows())[0]?.[0]).toContain(SCRIPT_CN);
  await page.locator("section[aria-label=Certificates] tbody a").first().click();
  await poll(() => page.getByText(`CN=${SCRIPT_CN}`, { exact: true }).count()).toBe(1);
  // The PEM download is the certificate the API holds.
  const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "Download PEM" }).click()]);
  const saved = await readFile(await download.path(), "utf8");
  expect(saved).toBe((await must("GET", `${PKI}/cert/${data.scriptSerial}`)).body.data.certificate);
  expect(download.suggestedFilename()).toBe(`${data.scriptSerial.replaceAll(":", "-")}.pem`);
  await revokeFromUi(data.scriptSerial, true);
  await expectOcspRevoked(data.scriptSerial);
}

/** A token that may read one PKI mount only sees that mount and nothing else. */
async function limitedStep() {
  await page.getByRole("button", { name: "Sign out" }).click();
  await signIn(data.limitedToken, NS);
  const navLinks = await page.getByRole("navigation", { name: "Main" }).getByRole("link").allTextContents();
  expect(navLinks).toEqual(["Overview", `PKI: ${PKI}`]);
  await poll(() => page.getByText("No access.").count()).toBeGreaterThanOrEqual(3);
  await shot("limited-token");
  await page.getByRole("link", { name: `PKI: ${PKI}`, exact: true }).click();
  await poll(async () => (await tableRows()).length).toBe(50);
  expect(await page.getByText(OTHER_PKI).count()).toBe(0);
}

async function revokeFromUi(serial: string, takeShots: boolean) {
  await poll(() => page.getByRole("button", { name: "Revoke" }).count()).toBe(1);
  if (takeShots) await shot("certificate");
  // By keyboard: Enter on the button opens the dialog with the focus on Cancel, Escape closes it.
  await page.getByRole("button", { name: "Revoke", exact: true }).focus();
  await page.keyboard.press("Enter");
  const dialog = page.getByRole("dialog", { name: "Revoke this certificate?" });
  await poll(() => dialog.count()).toBe(1);
  expect(await page.evaluate("document.activeElement && document.activeElement.textContent")).toBe("Cancel");
  await page.keyboard.press("Escape");
  await poll(() => dialog.count()).toBe(0);
  // Cancel: nothing happens.
  await page.getByRole("button", { name: "Revoke", exact: true }).click();
  await poll(() => dialog.count()).toBe(1);
  if (takeShots) await shot("revoke-confirm");
  await dialog.getByRole("button", { name: "Cancel" }).click();
  expect((await must("GET", `${PKI}/cert/${serial}`)).body.data.revocation_time).toBe(0);
  await page.getByRole("button", { name: "Revoke", exact: true }).click();
  await dialog.getByRole("button", { name: "Revoke certificate" }).click();
  await poll(() => page.locator(".cert-status").textContent()).toMatch(/^Revoked /);
}

async function expectOcspRevoked(serial: string) {
  const leafPem = (await must("GET", `${PKI}/cert/${serial}`)).body.data.certificate as string;
  const out = await withFiles({ "leaf.pem": leafPem, "root.pem": data.rootPem }, async (f) => {
    const r = await openssl(["ocsp", "-issuer", f("root.pem"), "-cert", f("leaf.pem"), "-url", `${inject("baseUrl")}/v1/${NS}/${PKI}/ocsp`, "-CAfile", f("root.pem")]);
    return `${r.stdout}\n${r.stderr}`;
  });
  expect(out).toMatch(/leaf\.pem: revoked/);
  expect(out).toMatch(/Response verify OK/);
}

async function syncStep() {
  const fake = inject("fakeEndpoints").CLOUDTHREE_ENDPOINT;
  // The provider throttles the next request and asks for 4 s of quiet: the first sync fails.
  await fetch(`${fake}/__fake/throttle`, { method: "POST", body: JSON.stringify({ throttle_next: 1, retry_after: 4 }) });
  await seedSync();
  await poll(associationStatus, { timeout: 15_000 }).toBe("EXTERNAL_SERVICE_ERROR");
  await page.getByRole("link", { name: "Secrets sync" }).click();
  const row = page.locator("section[aria-label=Associations] tbody tr").filter({ hasText: `${KV}/app/api` });
  await poll(() => row.locator("td").nth(2).textContent()).toBe("EXTERNAL_SERVICE_ERROR");
  expect(await row.locator("td").nth(3).textContent()).toMatch(/RESOURCE_EXHAUSTED|Quota exceeded/);
  await shot("sync-error");
  // The queue's retry after the provider's window: the page re-reads and shows SYNCED.
  await poll(() => row.locator("td").nth(2).textContent(), { timeout: 30_000 }).toBe("SYNCED");
  expect(await page.locator("section[aria-label=Associations] thead th").allTextContents()).toEqual(expect.arrayContaining(["Secret", "Destination", "Status"]));
  expect(await unnamedControls()).toEqual([]);
  await shot("sync-synced");
}

async function kvStep() {
  await page.getByRole("link", { name: `KV: ${KV}`, exact: true }).click();
  await poll(() => page.getByRole("link", { name: SCRIPT_KV, exact: true }).count()).toBe(1);
  await page.getByRole("link", { name: "app/", exact: true }).click();
  await page.getByRole("link", { name: "db", exact: true }).click();
  await poll(() => page.getByRole("button", { name: "Show value of version 2" }).count()).toBe(1);
  expect(await page.getByText("second-password").count()).toBe(0);
  await page.getByRole("button", { name: "Show value of version 2" }).click();
  await poll(() => page.getByText("second-password").count()).toBe(1);
  // While the value shows, its "Show value" button is hidden and "Hide value" takes it away again.
  expect(await page.getByRole("button", { name: "Show value of version 2" }).count()).toBe(0);
  await shot("kv");
  await page.getByRole("button", { name: "Hide value" }).click();
  await poll(() => page.getByText("second-password").count()).toBe(0);
  expect(await page.getByRole("button", { name: "Show value of version 2" }).count()).toBe(1);
  await page.getByRole("link", { name: KV, exact: true }).click();
  await page.getByRole("link", { name: SCRIPT_KV, exact: true }).click();
  await page.getByRole("button", { name: /Show value/ }).first().click();
  await poll(() => page.getByText("<b>not bold</b>").count()).toBe(1);
  expect(await page.locator("main b").count()).toBe(0);
}
