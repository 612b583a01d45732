/**
 * docs/secrets-sync.md "What Lanyard guarantees at the destination", rules 1, 2 and 5, against every destination type's fake: Lanyard never deletes an
 * external secret it did not create (remove, purge, a key dropped from the source), warns about
 * what it leaves, refuses an association whose external name another association of the
 * destination holds (the holder's value untouched), and every association read shows the
 * failure fields; a failure that exhausts its retries stays a dead letter until the next set.
 * No secret value appears in any answer, log line, or in the tables this work added.
 */
import { env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { api, read, write } from "../helpers/api";
import { FakeCloudone, CLOUDONE_HOSTS } from "../helpers/fake-cloudone";
import { FakeCloudthree, CLOUDTHREE_HOSTS } from "../helpers/fake-cloudthree";
import { FakeCloudtwo, CLOUDTWO_HOSTS } from "../helpers/fake-cloudtwo";
import { FakeRepohost, REPOHOST_HOSTS } from "../helpers/fake-repohost";
import { installFakes } from "../helpers/fake-router";
import { FakeWebhost, WEBHOST_HOSTS } from "../helpers/fake-webhost";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RFC3339, destPath, entries, kvSecret, removeAssoc, setAssoc, waitForStatus, type SyncSetup } from "../helpers/sync-engine";
import { RSA_PKCS8_PEM } from "../helpers/sync-fixtures";
import { openDb } from "../../src/core/db/client";
import { reconcileCandidates } from "../../src/engines/sync/association-store";
import { handleSyncBatch } from "../../src/engines/sync/consumer";
import { MAX_ATTEMPTS } from "../../src/engines/sync/messages";
import { parsePem } from "../../src/engines/sync/rsa";

const aws = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
const azure = new FakeCloudtwo();
const gcp = new FakeCloudthree();
const gh = new FakeRepohost([SECRETS.ghToken]);
const vercel = new FakeWebhost(SECRETS.vercelToken);
const PROJECT = "lanyard-test-project";
const REPO = "octo-org/hello-world";

/** Every secret value the tests write (KV values and values seeded at the providers). */
const VALUES: string[] = [];
const secretValue = (label: string): string => {
  const v = `${label}-${crypto.randomUUID()}`;
  VALUES.push(v);
  return v;
};
const logged: string[] = [];

let uninstall: () => void;
beforeAll(async () => {
  azure.addClient(BODIES["cloudtwo-kv"].tenant_id, BODIES["cloudtwo-kv"].client_id, SECRETS.clientSecret);
  await gcp.addAccount("sync@lanyard-test-project.iam.gserviceaccount.com", parsePem(RSA_PKCS8_PEM).der);
  vercel.addProject("prj_abc123");
  uninstall = installFakes([
    { hosts: CLOUDONE_HOSTS, fake: aws },
    { hosts: CLOUDTWO_HOSTS, fake: azure },
    { hosts: CLOUDTHREE_HOSTS, fake: gcp },
    { hosts: REPOHOST_HOSTS, fake: gh },
    { hosts: WEBHOST_HOSTS, fake: vercel },
  ]);
  // The Worker runs in this isolate: its log lines are collected and checked for values at the end.
  for (const level of ["log", "warn", "error", "info", "debug"] as const) {
    const original = console[level].bind(console);
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      logged.push(args.map((a) => (typeof a === "string" ? a : JSON.stringify(a) ?? String(a))).join(" "));
      original(...args);
    });
  }
});
afterAll(() => {
  uninstall();
  vi.restoreAllMocks();
});

interface Kit {
  type: "cloudone-sm" | "cloudtwo-kv" | "cloudthree-sm" | "repohost" | "webhost-project";
  body: Record<string, unknown>;
  /** secret-key granularity (one external secret per key) by default. */
  keyed: boolean;
  /** The type's name normalisation (docs/secrets-sync.md "Secret-name templates"). */
  norm(s: string): string;
  /** The default template's name; `key` under secret-key granularity. */
  name(s: SyncSetup, key?: string): string;
  seed(name: string, value: string): void;
  value(name: string): string | undefined;
  /** Whether the secret carries Lanyard's `lanyard-managed` tag/label; undefined where the provider has none. */
  managed(name: string): boolean | undefined;
}

const upperSnake = (s: string) => s.toUpperCase().replace(/[^A-Z0-9_]/g, "_");
const keyedName = (s: SyncSetup, key = "") => upperSnake(`VAULT_${s.accessor}_${s.secret}_${key}`);

const KITS: Kit[] = [
  {
    type: "cloudone-sm",
    body: BODIES["cloudone-sm"],
    keyed: false,
    norm: (s) => s.replace(/[^A-Za-z0-9/_+=.@-]/g, "_"),
    name: (s) => `vault/${s.accessor}/${s.secret}`,
    seed: (n, v) => aws.createOutOfBand(n, v, { owner: "platform-team" }),
    value: (n) => aws.value(n),
    managed: (n) => aws.secrets.get(n)?.tags["lanyard-managed"] === "true",
  },
  {
    type: "cloudtwo-kv",
    body: BODIES["cloudtwo-kv"],
    keyed: false,
    norm: (s) => s.replace(/[^0-9A-Za-z-]/g, "-"),
    name: (s) => `vault-${s.accessor}-${s.secret}`.replace(/[^0-9A-Za-z-]/g, "-"),
    seed: (n, v) => azure.createOutOfBand(n, v, { owner: "platform-team" }),
    value: (n) => azure.value(n),
    managed: (n) => azure.secrets.get(n.toLowerCase())?.tags["lanyard-managed"] === "true",
  },
  {
    type: "cloudthree-sm",
    body: BODIES["cloudthree-sm"],
    keyed: false,
    norm: (s) => s.replace(/[^A-Za-z0-9_-]/g, "_"),
    name: (s) => `vault/${s.accessor}/${s.secret}`.replace(/[^A-Za-z0-9_-]/g, "_"),
    seed: (n, v) => gcp.createOutOfBand(PROJECT, n, v, { owner: "platform-team" }),
    value: (n) => gcp.value(PROJECT, n),
    managed: (n) => gcp.secrets.get(`${PROJECT}/${n}`)?.labels["lanyard-managed"] === "true",
  },
  {
    type: "repohost",
    body: BODIES.repohost,
    keyed: true,
    norm: upperSnake,
    name: keyedName,
    // Setting a secret in the host's UI creates it when it does not exist.
    seed: (n, v) => gh.editOutOfBand(REPO, n, v),
    value: (n) => gh.value(REPO, n),
    managed: () => undefined,
  },
  {
    type: "webhost-project",
    body: BODIES["webhost-project"],
    keyed: true,
    norm: upperSnake,
    name: keyedName,
    seed: (n, v) => vercel.createOutOfBand("prj_abc123", n, v),
    value: (n) => vercel.value("prj_abc123", n),
    managed: () => undefined,
  },
];

async function destination(kit: Kit, extra: Record<string, unknown> = {}): Promise<string> {
  const name = `${kit.type.slice(0, 5)}-${uid()}`;
  await write(destPath(kit.type, name), { ...kit.body, ...extra });
  return name;
}

/** The value the connector sends: the whole secret as JSON (secret-path) or the key's value. */
const sent = (kit: Kit, data: Record<string, string>, key: string): string => (kit.keyed ? (data[key] ?? "") : JSON.stringify(data));

/** The failure fields every association read carries (rule 5). */
function expectAttemptFields(e: Record<string, unknown> | undefined, failed: boolean): void {
  expect(e).toBeDefined();
  expect(e).toMatchObject({ drift_detected_at: "", drift_count: 0, dead_letter: false, dead_lettered_at: "", next_retry_at: "" });
  expect(e?.last_attempt_at).toMatch(RFC3339);
  expect(e?.attempts).toBeGreaterThanOrEqual(1);
  if (failed) expect(e?.last_error).not.toBe("");
  else expect(e?.last_error).toBe("");
}

describe.each(KITS)("$type", (kit) => {
  it("rule 2: a pre-existing secret is overwritten but never deleted (remove and a dropped key leave it, remove warns); what Lanyard created is deleted", async () => {
    const dest = await destination(kit);
    const data: Record<string, string> = kit.keyed ? { a: secretValue("a"), b: secretValue("b"), c: secretValue("c") } : { k: secretValue("k") };
    const s = await kvSecret(data);
    // Someone made these before Lanyard: the whole secret, or keys a and c.
    const found = kit.keyed ? [kit.name(s, "a"), kit.name(s, "c")] : [kit.name(s)];
    for (const n of found) kit.seed(n, secretValue("theirs"));
    const made = await kvSecret({ m: secretValue("m") }, "made/one");
    const madeName = kit.name(made, "m");

    const r = await setAssoc(kit.type, dest, s);
    for (const e of Object.values(r.body.data.associated_secrets as Record<string, Record<string, unknown>>)) expect(e.sync_status).toBe("SYNCED");
    expect(kit.value(found[0] ?? "")).toBe(sent(kit, data, "a")); // overwritten, as Vault does
    await setAssoc(kit.type, dest, made);
    expect(kit.value(madeName)).toBeDefined();
    if (kit.managed(madeName) !== undefined) {
      expect(kit.managed(madeName)).toBe(true);
      for (const n of found) expect(kit.managed(n)).toBe(false);
    }

    if (kit.keyed) {
      // Key c dropped from the source: its pre-existing secret stays, with the last value written.
      await write(`${s.mount}/data/${s.secret}`, { data: { a: data.a, b: data.b } });
      await vi.waitFor(async () => expect(Object.keys(await entries(kit.type, dest))).not.toContain(`${s.accessor}/${s.secret}/c`), { timeout: 20_000, interval: 200 });
      expect(kit.value(kit.name(s, "c"))).toBe(data.c);
    }

    const rm = await removeAssoc(kit.type, dest, s);
    const leftName = found[0] ?? "";
    expect(rm.body.warnings).toHaveLength(1);
    expect(rm.body.warnings[0]).toContain(`"${leftName}" existed at the destination before Lanyard first wrote it`);
    await vi.waitFor(async () => expect(Object.keys(await entries(kit.type, dest)).some((k) => k.startsWith(`${s.accessor}/`))).toBe(false), { timeout: 20_000, interval: 200 });
    expect(kit.value(leftName)).toBe(sent(kit, data, "a"));
    if (kit.keyed) expect(kit.value(kit.name(s, "b"))).toBeUndefined(); // b was Lanyard's

    const rmMade = await removeAssoc(kit.type, dest, made);
    expect(rmMade.body.warnings ?? []).toEqual([]);
    await vi.waitFor(() => expect(kit.value(madeName)).toBeUndefined(), { timeout: 20_000, interval: 200 });
  });

  it("rule 2: a purge answers 200 with a warning listing the pre-existing secrets, leaves them and deletes the rest", async () => {
    const dest = await destination(kit);
    const theirs = await kvSecret({ p: secretValue("p") }, "kept/one");
    const ours = await kvSecret({ q: secretValue("q") }, "gone/one");
    const theirsName = kit.name(theirs, "p");
    const oursName = kit.name(ours, "q");
    kit.seed(theirsName, secretValue("theirs"));
    await setAssoc(kit.type, dest, theirs);
    await setAssoc(kit.type, dest, ours);
    expect(kit.value(oursName)).toBeDefined();

    const purge = await api("DELETE", `${destPath(kit.type, dest)}?purge=true`);
    expect(purge.status).toBe(200);
    expect(purge.body.warnings).toHaveLength(1);
    expect(purge.body.warnings[0]).toContain(`the purge leaves 1 secret at the destination that existed before Lanyard first wrote it`);
    expect(purge.body.warnings[0]).toContain(`"${theirsName}"`);
    expect(purge.body.warnings[0]).not.toContain(oursName);
    await vi.waitFor(async () => expect((await api("GET", destPath(kit.type, dest))).status).toBe(404), { timeout: 30_000, interval: 250 });
    expect(kit.value(theirsName)).toBeDefined();
    expect(kit.value(oursName)).toBeUndefined();
  });

  it("rule 1 and rule 5: an association wanting a name another one holds is refused, the holder's value untouched; every read shows the failure fields", async () => {
    const template = kit.keyed ? "{{ .DestinationName }}_{{ .SecretPath }}_{{ .SecretKey }}" : "{{ .DestinationName }}/{{ .SecretPath }}";
    const dest = await destination(kit, { secret_name_template: template });
    const ownerValue = secretValue("owner");
    const newValue = secretValue("newcomer");
    const owner = await kvSecret({ k: ownerValue });
    const newcomer = await kvSecret({ k: newValue });
    const name = kit.norm(kit.keyed ? `${dest}_${owner.secret}_k` : `${dest}/${owner.secret}`);
    const ownerSent = sent(kit, { k: ownerValue }, "k");
    const setOwner = await setAssoc(kit.type, dest, owner);
    expect(kit.value(name)).toBe(ownerSent);
    expectAttemptFields(Object.values(setOwner.body.data.associated_secrets as Record<string, Record<string, unknown>>)[0], false);

    const r = await setAssoc(kit.type, dest, newcomer);
    const key = `${newcomer.accessor}/${newcomer.secret}`;
    const e = r.body.data.associated_secrets[key];
    expect(e.sync_status).toBe("CLIENT_SIDE_ERROR");
    expect(e.last_error).toContain(`"${name}" is already synced to this destination by ${owner.mount}/${owner.secret}`);
    expect(kit.value(name)).toBe(ownerSent);
    for (const v of VALUES) expect(r.text).not.toContain(v);

    // Rule 5: the same fields on the destination's read, both by-secret reads and the LIST.
    expectAttemptFields((await entries(kit.type, dest))[key], true);
    const byPath = await read(`sys/sync/associations/${newcomer.mount}/${newcomer.secret}`);
    expectAttemptFields(byPath.body.data.associated_destinations[`${kit.type}/${dest}`], true);
    const byQuery = await read(`sys/sync/associations/destinations?mount=${newcomer.mount}&secret_name=${newcomer.secret}`);
    expectAttemptFields(byQuery.body.data.associated_destinations[`${kit.type}/${dest}`], true);
    const listed = await read("sys/sync/associations?list=true");
    const row = (listed.body.data.key_info[`${newcomer.mount}/${newcomer.secret}`] as Record<string, unknown>[]).find((x) => x.name === dest);
    expectAttemptFields(row, true);
    for (const v of VALUES) expect(byPath.text + byQuery.text + listed.text).not.toContain(v);

    // Once the holder lets go, setting the newcomer again writes the name.
    await removeAssoc(kit.type, dest, owner);
    await vi.waitFor(async () => expect(Object.keys(await entries(kit.type, dest)).some((k) => k.startsWith(`${owner.accessor}/`))).toBe(false), { timeout: 20_000, interval: 200 });
    const again = await setAssoc(kit.type, dest, newcomer);
    const synced = Object.entries(again.body.data.associated_secrets as Record<string, Record<string, unknown>>).find(([k]) => k.startsWith(`${newcomer.accessor}/`))?.[1];
    expect(synced?.sync_status).toBe("SYNCED");
    expectAttemptFields(synced, false);
    expect(kit.value(name)).toBe(sent(kit, { k: newValue }, "k"));
  });
});

describe("rule 2 and rule 5 beyond the types", () => {
  it("a purge that leaves nothing behind answers 204, as before", async () => {
    const kit = KITS[0] as Kit;
    const dest = await destination(kit);
    await setAssoc(kit.type, dest, await kvSecret({ k: secretValue("solo") }));
    const purge = await api("DELETE", `${destPath(kit.type, dest)}?purge=true`);
    expect(purge.status).toBe(204);
  });

  it("a failure that exhausts its retries stays a dead letter (shown on the read, left alone by reconciliation) until set retries it", async () => {
    const dest = await destination(KITS[0] as Kit);
    const s = await kvSecret({ k: secretValue("dead") });
    const key = `${s.accessor}/${s.secret}`;
    const serverError = { kind: "status" as const, status: 500, body: { __type: "InternalServiceError", message: "An error occurred on the server side." } };
    for (let i = 0; i < 40; i++) aws.faults.push(serverError);
    try {
      const r = await setAssoc("cloudone-sm", dest, s);
      const first = r.body.data.associated_secrets[key];
      expect(first).toMatchObject({ sync_status: "EXTERNAL_SERVICE_ERROR", attempts: 1, dead_letter: false });
      expect(first.last_error).toContain("InternalServiceError");
      expect(first.next_retry_at).toMatch(RFC3339);
      expect(Date.parse(first.next_retry_at)).toBeGreaterThan(Date.parse(first.last_attempt_at));

      // The queue's last delivery (attempts = MAX_ATTEMPTS) fails too: retries are exhausted.
      const row = await env.DB.prepare("SELECT id FROM sync_associations WHERE destination_name = ?").bind(dest).first<{ id: string }>();
      const id = row?.id ?? "";
      await vi.waitFor(
        async () => {
          const msg = { id: `m-${uid()}`, timestamp: new Date(), body: { kind: "association", id }, attempts: MAX_ATTEMPTS, ack() {}, retry() {} };
          await handleSyncBatch({ queue: "lanyard-sync", messages: [msg], ackAll() {}, retryAll() {} } as unknown as MessageBatch<unknown>, env);
          expect((await entries("cloudone-sm", dest))[key]?.dead_letter).toBe(true);
        },
        { timeout: 20_000, interval: 300 },
      );
      const dead = (await entries("cloudone-sm", dest))[key];
      expect(dead).toMatchObject({ sync_status: "EXTERNAL_SERVICE_ERROR", dead_letter: true, next_retry_at: "" });
      expect(dead?.dead_lettered_at).toMatch(RFC3339);
      const later = Date.now() + 86_400_000;
      expect((await reconcileCandidates(openDb(env.DB), later, later, later, 1000)).map((a) => a.id)).not.toContain(id);
      for (const v of VALUES) expect(JSON.stringify(dead)).not.toContain(v);
    } finally {
      aws.faults.length = 0;
    }
    const again = await setAssoc("cloudone-sm", dest, s);
    expect(again.body.data.associated_secrets[key]).toMatchObject({ sync_status: "SYNCED", dead_letter: false, dead_lettered_at: "", last_error: "", next_retry_at: "" });
    await waitForStatus("cloudone-sm", dest, key, "SYNCED");
  });

  it("no secret value in any log line or in the rows this work added", async () => {
    const rows = await env.DB.prepare("SELECT * FROM sync_external_secrets").all();
    expect(rows.results.length).toBeGreaterThan(0);
    const assocs = await env.DB.prepare("SELECT * FROM sync_associations").all();
    const stored = JSON.stringify(rows.results) + JSON.stringify(assocs.results);
    for (const v of VALUES) {
      expect(stored).not.toContain(v);
      for (const line of logged) expect(line).not.toContain(v);
    }
  });
});
