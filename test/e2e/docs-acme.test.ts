/**
 * docs/pki-acme.md's worked example, pasted as written: every shell block marked
 * `<!-- docs-e2e: run -->` runs in one bash session against the e2e Worker (`LANYARD`, `ROOT`),
 * with Debian's lego, openssl, jq and xxd, and `HTTP01_PORT` a port the http-01 relay
 * (./acme-http01-relay.ts) routes the example's name to, as the README's ACME section sets up by
 * hand. Then what it printed is checked: the directory's renewalInfo and profiles, a window two
 * thirds into the certificate's validity as openssl reads it, Retry-After, after the issuer is
 * marked a window in the past with the explanationURL, and the revocation reason lego gave in
 * the CRL as `openssl crl -text` reads it.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { expect, inject, it } from "vitest";
import { freePort, relayHost } from "./acme-clients";
import { E2E_ROOT_TOKEN } from "./env";

const run = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, "../..");

/** The bodies of the fenced bash blocks right after a `<!-- docs-e2e: run -->` line. */
function taggedBlocks(doc: string): string[] {
  return [...doc.matchAll(/<!--\s*docs-e2e:\s*run\s*-->\s*\n```bash\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? "");
}

it("docs/pki-acme.md's worked example (ARI, mass renewal, profiles) runs as written", async () => {
  const blocks = taggedBlocks(await readFile(path.join(REPO, "docs/pki-acme.md"), "utf8"));
  expect(blocks.length).toBeGreaterThan(0);
  const port = await freePort();
  await relayHost("shop.example.com", port);
  const dir = await mkdtemp(path.join(tmpdir(), "lanyard-docs-acme-"));
  const env = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
  // The options inside the script: bash started over a socketpair (as node's stdio) may read
  // /etc/bash.bashrc first, which `-u` would break.
  const { stdout } = await run("bash", ["-c", ["set -xeuo pipefail", ...blocks].join("\n")], {
    cwd: dir,
    env: { ...env, LANYARD: inject("baseUrl"), ROOT: E2E_ROOT_TOKEN, HTTP01_PORT: String(port) },
    timeout: 180_000,
    maxBuffer: 8 * 1024 * 1024,
  }).catch((e: { stdout?: string; stderr?: string }) => {
    throw new Error(`the worked example failed:\n${(e.stdout ?? "").slice(-3000)}\n${(e.stderr ?? "").slice(-3000)}`);
  });
  const lines = stdout.split("\n");
  /** The JSON object starting with `start` on a line of the output. */
  const json = (start: string, ok: (l: string) => boolean = () => true) => {
    const line = lines.find((l) => l.includes(start) && ok(l)) ?? "";
    return JSON.parse(line.slice(line.indexOf(start)) || "{}");
  };
  const directory = json('{"renewalInfo"');
  expect(directory.renewalInfo).toBe(`${inject("baseUrl")}/v1/pki_acme/acme/renewal-info`);
  expect(Object.keys(directory.profiles).sort()).toEqual(["classic", "shortlived"]);

  // openssl's dates of the certificate; the window centred two thirds in, ± 1 %.
  const nb = Date.parse((/notBefore=(.+)/.exec(stdout)?.[1] ?? "").trim());
  const na = Date.parse((/notAfter=(.+)/.exec(stdout)?.[1] ?? "").trim());
  expect(Math.round((na - nb) / 3600_000)).toBe(720);
  expect(stdout).toMatch(/^retry-after: 21600\r?$/im);
  const first = json('{"suggestedWindow"', (l) => !l.includes("explanationURL"));
  const ideal = na - (na + 1000 - nb) / 3;
  expect(Math.abs(Date.parse(first.suggestedWindow.start) - (ideal - (na - nb) / 100))).toBeLessThan(2000);
  expect(Math.abs(Date.parse(first.suggestedWindow.end) - (ideal + (na - nb) / 100))).toBeLessThan(2000);

  expect(json('{"kind"')).toEqual({ kind: "issuer", explanation_url: "https://status.example.com/root-rollover" });
  const marked = json('{"suggestedWindow"', (l) => l.includes("explanationURL"));
  expect(marked.explanationURL).toBe("https://status.example.com/root-rollover");
  expect(Date.parse(marked.suggestedWindow.end)).toBeLessThan(Date.now());
  // openssl's reading of the CRL: lego's --reason 4 became the entry's reasonCode.
  expect(stdout).toMatch(/X509v3 CRL Reason Code:\s*\n\s*Superseded/);
  await rm(dir, { recursive: true, force: true });
}, 240_000);
