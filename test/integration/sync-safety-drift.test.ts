/**
 * Drift (docs/secrets-sync.md "3. Drift is detected and repaired") against every destination type's fake, all types at once: a secret
 * changed out of band and one deleted out of band (AWS: scheduled for deletion, so the repair
 * goes through RestoreSecret; Key Vault: soft-deleted, so it recovers it) are rewritten from the
 * source after POST …/reconcile (202, data.queued), and the association shows drift_detected_at
 * and drift_count; with drift_repair false the drift is reported and nothing is written; the
 * cron starts a pass every reconcile_interval (0: never). No secret value appears in any log
 * line or association read.
 */
import { env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { api, patch, read, write } from "../helpers/api";
import { CLOUDONE_HOSTS, FakeCloudone } from "../helpers/fake-cloudone";
import { CLOUDTHREE_HOSTS, FakeCloudthree } from "../helpers/fake-cloudthree";
import { CLOUDTWO_HOSTS, FakeCloudtwo } from "../helpers/fake-cloudtwo";
import { FakeRepohost, REPOHOST_HOSTS } from "../helpers/fake-repohost";
import { installFakes } from "../helpers/fake-router";
import { FakeWebhost, WEBHOST_HOSTS } from "../helpers/fake-webhost";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RFC3339, destPath, entries, kvSecret, setAssoc, type SyncSetup } from "../helpers/sync-engine";
import { RSA_PKCS8_PEM } from "../helpers/sync-fixtures";
import { openDb } from "../../src/core/db/client";
import { loadConfig } from "../../src/core/config";
import { syncReconcileJob } from "../../src/engines/sync/cron";
import { driftPassDue, startDriftPass } from "../../src/engines/sync/reconcile";
import { parsePem } from "../../src/engines/sync/rsa";

/** The five destination types the fixtures cover. */
type DestinationType = keyof typeof BODIES;

const aws = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
const azure = new FakeCloudtwo();
const gcp = new FakeCloudthree();
const gh = new FakeRepohost([SECRETS.ghToken]);
const vercel = new FakeWebhost(SECRETS.vercelToken);
const PROJECT = "lanyard-test-project";
const REPO = "octo-org/hello-world";
const VERCEL = BODIES["webhost-project"].project_id;

/** Every secret value the tests write, at Lanyard or out of band. */
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
  vercel.addProject(VERCEL);
  uninstall = installFakes([
    { hosts: CLOUDONE_HOSTS, fake: aws },
    { hosts: CLOUDTWO_HOSTS, fake: azure },
    { hosts: CLOUDTHREE_HOSTS, fake: gcp },
    { hosts: REPOHOST_HOSTS, fake: gh },
    { hosts: WEBHOST_HOSTS, fake: vercel },
  ]);
  for (const level of ["log", "warn", "error", "info", "debug"] as const) {
    const original = console[level].bind(console);
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      logged.push(args.map((a) => (typeof a === "string" ? a : (JSON.stringify(a) ?? String(a)))).join(" "));
      original(...args);
    });
  }
});
afterAll(() => {
  uninstall();
  vi.restoreAllMocks();
  // Nothing the tests wrote, at Lanyard or out of band, is in a log line.
  expect(logged.filter((l) => VALUES.some((v) => l.includes(v)))).toEqual([]);
});

interface Kit {
  type: DestinationType;
  /** The external name of the association's one external secret. */
  name(s: SyncSetup): string;
  /** What the provider should hold for KV data {k: v}. */
  expected(v: string): string;
  value(name: string): string | undefined;
  edit(name: string, value: string): void;
  delete(name: string): void;
}

const hyphen = (s: string) => s.replace(/[^0-9A-Za-z-]/g, "-");
const under = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, "_");
const upper = (s: string) => s.toUpperCase().replace(/[^A-Z0-9_]/g, "_");
const whole = (v: string) => JSON.stringify({ k: v });

const KITS: Kit[] = [
  {
    type: "cloudone-sm",
    name: (s) => `vault/${s.accessor}/${s.secret}`,
    expected: whole,
    value: (n) => aws.value(n),
    edit: (n, v) => aws.editOutOfBand(n, v),
    // With the default recovery window: scheduled for deletion, not gone.
    delete: (n) => aws.deleteOutOfBand(n),
  },
  {
    type: "cloudtwo-kv",
    name: (s) => hyphen(`vault-${s.accessor}-${s.secret}`),
    expected: whole,
    value: (n) => azure.value(n),
    edit: (n, v) => azure.editOutOfBand(n, v),
    // Soft-deleted: a plain PUT would be refused with 409 ObjectIsDeletedButRecoverable.
    delete: (n) => azure.deleteOutOfBand(n),
  },
  {
    type: "cloudthree-sm",
    name: (s) => under(`vault/${s.accessor}/${s.secret}`),
    expected: whole,
    value: (n) => gcp.value(PROJECT, n),
    edit: (n, v) => gcp.editOutOfBand(PROJECT, n, v),
    delete: (n) => gcp.deleteOutOfBand(PROJECT, n),
  },
  {
    type: "repohost",
    name: (s) => upper(`VAULT_${s.accessor}_${s.secret}_k`),
    expected: (v) => v,
    value: (n) => gh.value(REPO, n),
    // The host keeps whole seconds: the edit is stamped two seconds after Lanyard's write.
    edit: (n, v) => gh.editOutOfBand(REPO, n, v, Date.now() + 2000),
    delete: (n) => gh.deleteOutOfBand(REPO, n),
  },
  {
    type: "webhost-project",
    name: (s) => upper(`VAULT_${s.accessor}_${s.secret}_k`),
    expected: (v) => v,
    value: (n) => vercel.value(VERCEL, n),
    edit: (n, v) => vercel.editOutOfBand(VERCEL, n, v),
    delete: (n) => vercel.deleteOutOfBand(VERCEL, n),
  },
];

interface Run {
  kit: Kit;
  dest: string;
  s: SyncSetup;
  name: string;
  source: string;
}

/** A destination of the kit's type, one KV secret {k: value} associated with it, SYNCED. */
async function setup(kit: Kit, extra: Record<string, unknown> = {}): Promise<Run> {
  const dest = `drift-${uid()}`;
  await write(destPath(kit.type, dest), { ...BODIES[kit.type], ...extra });
  const v = secretValue("source");
  const s = await kvSecret({ k: v }, `app-${uid()}`);
  const entry = Object.values((await setAssoc(kit.type, dest, s)).body.data.associated_secrets)[0] as Record<string, unknown>;
  expect(entry.sync_status, kit.type).toBe("SYNCED");
  const name = kit.name(s);
  expect(kit.value(name), kit.type).toBe(kit.expected(v));
  return { kit, dest, s, name, source: kit.expected(v) };
}

async function reconcile(r: Run): Promise<void> {
  const res = await api("POST", `${destPath(r.kit.type, r.dest)}/reconcile`);
  expect(res.status, `${r.kit.type}: ${res.text}`).toBe(202);
  expect(res.body.data).toEqual({ queued: 1 });
}

async function entry(r: Run): Promise<Record<string, unknown>> {
  const e = Object.values(await entries(r.kit.type, r.dest))[0];
  if (!e) throw new Error(`${r.kit.type}: no association entry`);
  return e;
}

async function driftCount(r: Run, n: number): Promise<void> {
  await vi.waitFor(async () => expect((await entry(r)).drift_count, r.kit.type).toBe(n), { timeout: 20_000, interval: 100 });
}

async function repaired(r: Run, driftCountNow: number): Promise<void> {
  await vi.waitFor(() => expect(r.kit.value(r.name), r.kit.type).toBe(r.source), { timeout: 20_000, interval: 100 });
  await vi.waitFor(
    async () => {
      const e = await entry(r);
      expect(e.sync_status, r.kit.type).toBe("SYNCED");
      expect(e.drift_count, r.kit.type).toBe(driftCountNow);
      expect(e.drift_detected_at, r.kit.type).toMatch(RFC3339);
      expect(e.last_error, r.kit.type).toBe("");
      expect(JSON.stringify(e)).not.toMatch(/source-|oob-/);
    },
    { timeout: 20_000, interval: 100 },
  );
}

describe("drift repair", () => {
  it("every type: an out-of-band edit, then an out-of-band delete, are rewritten from the source after reconcile", async () => {
    const runs = await Promise.all(KITS.map((k) => setup(k)));
    for (const r of runs) {
      const e = await entry(r);
      expect(e.drift_count, r.kit.type).toBe(0);
      expect(e.drift_detected_at, r.kit.type).toBe("");
    }
    // A reconcile with nothing changed finds no drift and writes nothing.
    const before = aws.calls.length;
    await Promise.all(runs.map(reconcile));
    await new Promise((res) => setTimeout(res, 2500));
    for (const r of runs) expect((await entry(r)).drift_count, r.kit.type).toBe(0);
    expect(aws.calls.slice(before).filter((c) => !c.startsWith("GetSecretValue"))).toEqual([]);

    for (const r of runs) r.kit.edit(r.name, secretValue("oob"));
    await Promise.all(runs.map(reconcile));
    await Promise.all(runs.map((r) => repaired(r, 1)));

    for (const r of runs) r.kit.delete(r.name);
    expect(aws.secrets.get(runs[0]?.name ?? "")?.deletedDate).toBeDefined();
    await Promise.all(runs.map(reconcile));
    await Promise.all(runs.map((r) => repaired(r, 2)));
    // AWS: brought back from its scheduled deletion, not re-created; Key Vault: recovered, same secret.
    const one = runs[0];
    expect(one && aws.calls.filter((c) => c === `RestoreSecret ${one.name}`)).toHaveLength(1);
    expect(one && aws.calls.filter((c) => c === `CreateSecret ${one.name}`)).toHaveLength(1);
    const two = runs[1];
    expect(two && azure.secrets.get(two.name.toLowerCase())?.deleted).toBe(false);
  });

  it("under secret-key granularity only the drifted key is rewritten", async () => {
    const dest = `drift-keys-${uid()}`;
    await write(destPath("repohost", dest), BODIES.repohost);
    const data = { a: secretValue("source"), b: secretValue("source"), c: secretValue("source") };
    const s = await kvSecret(data, `keys-${uid()}`);
    await setAssoc("repohost", dest, s);
    const name = (k: string) => upper(`VAULT_${s.accessor}_${s.secret}_${k}`);
    const puts = (k: string) => gh.calls.filter((c) => c.startsWith("PUT ") && c.endsWith(`/${name(k)}`)).length;
    expect([puts("a"), puts("b"), puts("c")]).toEqual([1, 1, 1]);
    gh.editOutOfBand(REPO, name("b"), secretValue("oob"), Date.now() + 2000);
    const res = await api("POST", `${destPath("repohost", dest)}/reconcile`);
    expect(res.body.data).toEqual({ queued: 1 });
    await vi.waitFor(() => expect(gh.value(REPO, name("b"))).toBe(data.b), { timeout: 20_000, interval: 100 });
    expect([puts("a"), puts("b"), puts("c")]).toEqual([1, 2, 1]);
    await vi.waitFor(async () => expect(Object.values(await entries("repohost", dest)).map((e) => [e.sync_status, e.drift_count])).toEqual([["SYNCED", 1], ["SYNCED", 1], ["SYNCED", 1]]), {
      timeout: 20_000,
      interval: 100,
    });
  });

  it("drift_repair false: the drift is reported (drift_detected_at, drift_count), nothing is written", async () => {
    const runs = await Promise.all(KITS.map((k) => setup(k, { drift_repair: false })));
    const first = runs[0];
    if (!first) throw new Error("no run");
    expect((await read(destPath(first.kit.type, first.dest))).body.data.options.drift_repair).toBe(false);
    const edited = new Map<Run, string>();
    for (const r of runs) {
      const v = secretValue("oob");
      r.kit.edit(r.name, v);
      edited.set(r, v);
    }
    await Promise.all(runs.map(reconcile));
    await Promise.all(runs.map((r) => driftCount(r, 1)));
    await new Promise((res) => setTimeout(res, 1500));
    for (const r of runs) {
      expect(r.kit.value(r.name), r.kit.type).toBe(edited.get(r));
      const e = await entry(r);
      expect(e.sync_status, r.kit.type).toBe("SYNCED");
      expect(e.drift_detected_at, r.kit.type).toMatch(RFC3339);
    }
    // Still drifted at the next pass: found (and counted) again, still not written.
    await Promise.all(runs.map(reconcile));
    await Promise.all(runs.map((r) => driftCount(r, 2)));
    for (const r of runs) expect(r.kit.value(r.name), r.kit.type).toBe(edited.get(r));
  });
});

describe("when reconciliation runs", () => {
  it("the cron starts a pass when a reconcile_interval period begins (aligned to the epoch); 0 turns it off", async () => {
    expect(driftPassDue(3600, Date.UTC(2026, 10, 25, 15, 0))).toBe(true);
    expect(driftPassDue(3600, Date.UTC(2026, 10, 25, 15, 1))).toBe(false);
    expect(driftPassDue(3600, Date.UTC(2026, 10, 25, 15, 0, 30))).toBe(true);
    expect(driftPassDue(30, Date.UTC(2026, 10, 25, 15, 7))).toBe(true);
    expect(driftPassDue(0, Date.UTC(2026, 10, 25, 15, 0))).toBe(false);

    const deps = { env, db: openDb(env.DB), keys: loadConfig(env).seal };
    const hour = Date.UTC(2026, 10, 25, 16, 0);
    expect((await read("sys/sync/config")).body.data.reconcile_interval).toBe("1h0m0s");
    await patch("sys/sync/config", { reconcile_interval: "0" });
    try {
      expect(await startDriftPass(deps, hour)).toBe(false);
    } finally {
      await patch("sys/sync/config", { reconcile_interval: null });
    }
    expect(await startDriftPass(deps, hour + 60_000)).toBe(false);

    const kit = KITS[1];
    if (!kit) throw new Error("no kit");
    const r = await setup(kit);
    kit.edit(r.name, secretValue("oob"));
    await syncReconcileJob(env, { scheduledTime: hour, cron: "* * * * *", noRetry: () => undefined } as ScheduledController);
    await repaired(r, 1);
  });

  it("reconcile: unknown destination 404, unknown type 400, nothing to check queues 0", async () => {
    expect((await api("POST", `${destPath("cloudtwo-kv", "nope")}/reconcile`)).status).toBe(404);
    const bad = await api("POST", "sys/sync/destinations/nosuch/x/reconcile");
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0]).toContain("type");
    const dest = `empty-${uid()}`;
    await write(destPath("cloudtwo-kv", dest), BODIES["cloudtwo-kv"]);
    const res = await api("POST", `${destPath("cloudtwo-kv", dest)}/reconcile`);
    expect(res.status).toBe(202);
    expect(res.body.data).toEqual({ queued: 0 });
  });
});
