/**
 * Provider limits (docs/secrets-sync.md "4. Provider limits are respected"), per destination type against its fake: a burst of changes
 * (parked while sync is disabled, then released at once) reaches the fake with no request beyond
 * the fake's limit (per second and in flight) and none lost, and a throttling answer in the
 * middle of it (each provider's own: AWS ThrottlingException without Retry-After, Azure 429 +
 * Retry-After, Google RESOURCE_EXHAUSTED + RetryInfo, the repository host's 403 secondary limit,
 * the web host's 429) is followed by no request inside the window the fake announced. Then
 * 1,000 changes at once with 3 in flight and 200 per second against cloudtwo-kv.
 * Lanyard's caps are lowered for the test (overrideLimits) so a burst takes seconds; the fakes'
 * limits are set just above them. Nothing logged or stored as an error carries a secret value.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { mount, patch, read, write } from "../helpers/api";
import { CLOUDONE_HOSTS, FakeCloudone } from "../helpers/fake-cloudone";
import { CLOUDTHREE_HOSTS, FakeCloudthree } from "../helpers/fake-cloudthree";
import { CLOUDTWO_HOSTS, FakeCloudtwo } from "../helpers/fake-cloudtwo";
import type { FakeThrottle } from "../helpers/fake-limits";
import { REPOHOST_HOSTS, FakeRepohost } from "../helpers/fake-repohost";
import { installFakes } from "../helpers/fake-router";
import { FakeWebhost, WEBHOST_HOSTS } from "../helpers/fake-webhost";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RSA_PKCS8_PEM } from "../helpers/sync-fixtures";
import { destPath, entries } from "../helpers/sync-engine";
import { overrideLimits } from "../../src/engines/sync/limits";
import type { LimitBudget } from "../../src/engines/sync/limits/types";
import { parsePem } from "../../src/engines/sync/rsa";

/** The five destination types the fixtures cover. */
type DestinationType = keyof typeof BODIES;

const one = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
const two = new FakeCloudtwo();
const three = new FakeCloudthree();
const gh = new FakeRepohost([SECRETS.ghToken]);
const vc = new FakeWebhost(SECRETS.vercelToken);

/** Every console line the Worker writes while the tests run (same isolate). */
const logged: string[] = [];
let uninstall: () => void;
beforeAll(async () => {
  two.addClient(BODIES["cloudtwo-kv"].tenant_id, BODIES["cloudtwo-kv"].client_id, SECRETS.clientSecret);
  await three.addAccount("sync@lanyard-test-project.iam.gserviceaccount.com", parsePem(RSA_PKCS8_PEM).der);
  vc.addProject(BODIES["webhost-project"].project_id);
  uninstall = installFakes([
    { hosts: CLOUDONE_HOSTS, fake: one },
    { hosts: CLOUDTWO_HOSTS, fake: two },
    { hosts: CLOUDTHREE_HOSTS, fake: three },
    { hosts: REPOHOST_HOSTS, fake: gh },
    { hosts: WEBHOST_HOSTS, fake: vc },
  ]);
  for (const level of ["log", "info", "warn", "error"] as const) {
    const original = console[level].bind(console);
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      logged.push(args.map((a) => (a instanceof Error ? `${a.name}: ${a.message}` : String(a))).join(" "));
      original(...args);
    });
  }
});
afterAll(() => {
  uninstall();
  vi.restoreAllMocks();
});
afterEach(() => {
  for (const t of TYPES) overrideLimits(t, null);
});

const TYPES: DestinationType[] = ["cloudone-sm", "cloudtwo-kv", "cloudthree-sm", "repohost", "webhost-project"];

interface Target {
  throttle: FakeThrottle;
  /** The value the fake holds under an external name (undefined when absent). */
  value(name: string): string | undefined;
  /** The external name of one key of one secret (secret-key granularity, default templates). */
  name(accessor: string, secret: string, key: string): string;
}

const under = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, "_");
const upper = (s: string) => s.toUpperCase().replace(/[^A-Z0-9_]/g, "_");

const TARGETS: Record<DestinationType, Target> = {
  "cloudone-sm": { throttle: one.throttle, value: (n) => one.value(n), name: (a, s, k) => `vault/${a}/${s}/${k}` },
  "cloudtwo-kv": { throttle: two.throttle, value: (n) => two.value(n), name: (a, s, k) => `vault-${a}-${s}-${k}`.replace(/[^0-9A-Za-z-]/g, "-") },
  "cloudthree-sm": { throttle: three.throttle, value: (n) => three.value("lanyard-test-project", n), name: (a, s, k) => under(`vault/${a}/${s}/${k}`) },
  repohost: { throttle: gh.throttle, value: (n) => gh.value("octo-org/hello-world", n), name: (a, s, k) => upper(`VAULT_${a}_${s}_${k}`) },
  "webhost-project": { throttle: vc.throttle, value: (n) => vc.value(BODIES["webhost-project"].project_id, n), name: (a, s, k) => upper(`VAULT_${a}_${s}_${k}`) },
};

function bodyOf(type: DestinationType): Record<string, unknown> {
  return { ...BODIES[type], granularity: "secret-key", secret_name_template: "" };
}

/** Lanyard's caps for a test: `concurrency` in flight, `perSecond` requests per second, `throttleMs` the unstated pause. */
function caps(concurrency: number, perSecond: number, throttleMs = 2000): LimitBudget {
  return { concurrency, windows: [{ id: "all", budget: perSecond, windowMs: 1000, cost: () => 1 }], throttleMs };
}

interface Burst {
  dest: string;
  /** external name → expected value */
  expected: Map<string, string>;
}

/**
 * For each type, `secrets` associations of `keys` keys each, parked while sync is disabled; then
 * sync is re-enabled and every change goes to the queue at once.
 */
async function burst(types: DestinationType[], secrets: number, keys: number): Promise<Map<DestinationType, Burst>> {
  const out = new Map<DestinationType, Burst>();
  await patch("sys/sync/config", { disabled: true });
  try {
    for (const type of types) {
      const dest = `lim-${uid()}`;
      await write(destPath(type, dest), bodyOf(type));
      const m = await mount("kv");
      const accessor = (await read("sys/mounts")).body.data[`${m}/`].accessor as string;
      const expected = new Map<string, string>();
      for (let i = 0; i < secrets; i++) {
        const data: Record<string, string> = {};
        for (let k = 0; k < keys; k++) {
          data[`k${k}`] = `val-${uid()}`;
          expected.set(TARGETS[type].name(accessor, `s${i}`, `k${k}`), data[`k${k}`] ?? "");
        }
        await write(`${m}/data/s${i}`, { data });
        await write(`${destPath(type, dest)}/associations/set`, { mount: m, secret_name: `s${i}` });
      }
      out.set(type, { dest, expected });
    }
  } finally {
    await patch("sys/sync/config", { disabled: false });
  }
  return out;
}

function burstOf(bursts: Map<DestinationType, Burst>, type: DestinationType): Burst {
  const b = bursts.get(type);
  if (!b) throw new Error(`no burst for ${type}`);
  return b;
}

async function allArrived(type: DestinationType, b: Burst, timeout: number): Promise<void> {
  const t = TARGETS[type];
  await vi.waitFor(
    () => {
      const missing = [...b.expected].filter(([n, v]) => t.value(n) !== v);
      expect(missing.length, `${type}: ${missing.length} of ${b.expected.size} not at the fake yet`).toBe(0);
    },
    { timeout, interval: 250 },
  );
  await vi.waitFor(
    async () => {
      const e = Object.values(await entries(type, b.dest));
      expect(e).toHaveLength(b.expected.size);
      expect(e.filter((x) => x.sync_status !== "SYNCED").map((x) => `${String(x.sub_key)}: ${String(x.sync_status)} ${String(x.last_error)}`)).toEqual([]);
    },
    { timeout: 20_000, interval: 250 },
  );
}

function noValueLeaked(b: Burst): void {
  const values = [...b.expected.values()];
  expect(logged.filter((line) => values.some((v) => line.includes(v)))).toEqual([]);
}

describe("provider limits", () => {
  it("every type: a burst within the fake's limits, a throttling answer in the middle of it, nothing inside the announced window, nothing lost", async () => {
    // Per type, one request at a time and 10 per second (the fake allows 1 in flight and 11 per
    // second: a request granted just before a window may arrive inside it). Once the burst is
    // under way each fake throttles one request its own way: AWS ThrottlingException without
    // Retry-After (Lanyard pauses for the type's time), Azure 429 Throttled with Retry-After,
    // Google 429 RESOURCE_EXHAUSTED with RetryInfo, the repository host's 403 secondary rate
    // limit with retry-after, the web host's 429 rate_limited with retry-after and
    // x-ratelimit-reset. One request at a time, so the answer is seen before anything else is sent.
    for (const type of TYPES) {
      overrideLimits(type, caps(1, 10, 1000));
      TARGETS[type].throttle.configure({ rules: [{ perWindow: 11, windowMs: 1000 }], concurrency: 1, retryAfterSeconds: 1 });
    }
    const bursts = await burst(TYPES, 4, 3);
    await Promise.all(
      TYPES.map(async (type) => {
        const t = TARGETS[type].throttle;
        await vi.waitFor(() => expect(t.requests, type).toBeGreaterThanOrEqual(3), { timeout: 20_000, interval: 20 });
        t.throttleNext(1);
        await vi.waitFor(() => expect(t.windows.length, type).toBe(1), { timeout: 20_000, interval: 20 });
        await allArrived(type, burstOf(bursts, type), 60_000);
      }),
    );
    for (const type of TYPES) {
      const t = TARGETS[type].throttle;
      const b = burstOf(bursts, type);
      const w = t.windows[0];
      expect(w && w.until - w.from, type).toBe(1000);
      expect(t.insideWindow, type).toEqual([]);
      expect(t.overLimit, type).toEqual([]);
      expect(t.maxInFlight, type).toBe(1);
      // Requests went on after the window: the burst was not over when it was announced.
      expect(t.requests, type).toBeGreaterThan(b.expected.size);
      noValueLeaked(b);
    }
  });

  it("cloudtwo-kv: 1,000 changes at once (20 secrets × 50 keys) reach the fake within its limits", async () => {
    // Lanyard: 3 in flight, 200 per second (the queue alone would reach about 4 in flight and
    // 260 per second here); the fake: 3 in flight, 206 per second.
    overrideLimits("cloudtwo-kv", caps(3, 200));
    two.throttle.configure({ rules: [{ perWindow: 206, windowMs: 1000 }], concurrency: 3, retryAfterSeconds: 2 });
    const b = burstOf(await burst(["cloudtwo-kv"], 20, 50), "cloudtwo-kv");
    const started = Date.now();
    expect(b.expected.size).toBe(1000);
    await allArrived("cloudtwo-kv", b, 120_000);
    expect(two.throttle.overLimit).toEqual([]);
    expect(two.throttle.windows).toEqual([]);
    expect(two.throttle.maxInFlight).toBeGreaterThan(1);
    expect(two.throttle.maxInFlight).toBeLessThanOrEqual(3);
    expect(two.throttle.requests).toBeGreaterThanOrEqual(1000);
    // At most 200 in any second: n requests take at least n/200 - 1 seconds.
    expect(Date.now() - started).toBeGreaterThanOrEqual((two.throttle.requests / 200 - 1) * 1000);
    noValueLeaked(b);
  });
});
