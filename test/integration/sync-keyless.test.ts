/**
 * Keyless destinations (docs/secrets-sync.md "Keyless destinations"): cloudone-sm, cloudtwo-kv
 * and cloudthree-sm with federation and no stored secret. Each fake's token service checks
 * Lanyard's identity token as the real one does (discovery and key set fetched over HTTP from
 * the Worker, ES256 signature, issuer, audience, expiry, the trusted subject) and hands out
 * temporary credentials that expire; the Secrets Manager fake checks SigV4 made with them
 * (session token included). A full sync (set, update, drift repair, unsync) runs on each type;
 * a mix of stored credentials and federation is a 400 naming the fields; each refused exchange
 * ends with a last_error naming the step. Afterwards no temporary credential and no private key
 * material is in any D1 row, log line or audit entry.
 */
import { env, SELF } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { api, patch, read, write } from "../helpers/api";
import { CLOUDONE_HOSTS, FakeCloudone } from "../helpers/fake-cloudone";
import { CLOUDTHREE_HOSTS, FakeCloudthree } from "../helpers/fake-cloudthree";
import { CLOUDTWO_HOSTS, FakeCloudtwo } from "../helpers/fake-cloudtwo";
import { installFakes } from "../helpers/fake-router";
import { BODIES, uid } from "../helpers/sync-bodies";
import { destPath, entries, kvSecret, removeAssoc, setAssoc, type SyncSetup } from "../helpers/sync-engine";
import { loadConfig } from "../../src/core/config";
import { unseal } from "../../src/core/db/seal";

const BASE = "http://lanyard.test";
const ISSUER = `${BASE}/v1/identity/oidc/plugins`;
const PROJECT = "lanyard-keyless";
const POOL_PROVIDER = "//iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/lanyard-pool/providers/lanyard";
const SA = `sync@${PROJECT}.iam.gserviceaccount.com`;
const TENANT = BODIES["cloudtwo-kv"].tenant_id;
const CLIENT = BODIES["cloudtwo-kv"].client_id;
const sub = (type: string, dest: string) => `plugin-identity:root:sync:${type}:${dest}`;
const roleArn = (dest: string) => `arn:aws:iam::123456789012:role/lanyard-${dest}`;

const aws = new FakeCloudone();
const azure = new FakeCloudtwo();
const gcp = new FakeCloudthree();
const logged: string[] = [];

let uninstall: () => void;
beforeAll(async () => {
  aws.oidcProviders.set(ISSUER, ["sts.amazonaws.com"]);
  gcp.providers.set(POOL_PROVIDER, { issuer: ISSUER, allowedAudiences: [POOL_PROVIDER] });
  uninstall = installFakes([
    { hosts: CLOUDONE_HOSTS, fake: aws },
    { hosts: CLOUDTWO_HOSTS, fake: azure },
    { hosts: CLOUDTHREE_HOSTS, fake: gcp },
    // The token services fetch Lanyard's discovery document and key set over HTTP.
    { hosts: ["lanyard.test"], fake: { handle: (req) => SELF.fetch(req) } },
  ]);
  for (const level of ["log", "warn", "error", "info", "debug"] as const) {
    const original = console[level].bind(console);
    vi.spyOn(console, level).mockImplementation((...args: unknown[]) => {
      const line = args.map((a) => (typeof a === "string" ? a : (JSON.stringify(a) ?? String(a)))).join(" ");
      logged.push(line);
      // Audit entries are kept for the final check, not printed.
      if (!line.startsWith('{"id":')) original(...args);
    });
  }
  // Every request audited (the stdout device writes to the console captured above).
  await write("sys/audit/keyless-stdout", { type: "stdout" }, {}, 204);
  await write("identity/oidc/config", { issuer: BASE });
});
afterAll(() => {
  uninstall();
  vi.restoreAllMocks();
});

interface Kit {
  type: "cloudone-sm" | "cloudtwo-kv" | "cloudthree-sm";
  /** The federated body of a destination, with its trust configured at the fake. */
  federate(dest: string): Record<string, unknown>;
  name(s: SyncSetup): string;
  value(name: string): string | undefined;
  edit(name: string, value: string): void;
}

const KITS: Kit[] = [
  {
    type: "cloudone-sm",
    federate(dest) {
      aws.roles.set(roleArn(dest), { trusted: [], webIdentity: { issuer: ISSUER, sub: sub("cloudone-sm", dest) } });
      return { role_arn: roleArn(dest), identity_token_audience: "sts.amazonaws.com", identity_token_ttl: "2m", region: "us-east-1" };
    },
    name: (s) => `vault/${s.accessor}/${s.secret}`,
    value: (n) => aws.value(n),
    edit: (n, v) => aws.editOutOfBand(n, v),
  },
  {
    type: "cloudtwo-kv",
    federate(dest) {
      azure.addFederatedCredential(TENANT, CLIENT, { issuer: ISSUER, subject: sub("cloudtwo-kv", dest), audience: "api://AzureADTokenExchange" });
      return { key_vault_uri: BODIES["cloudtwo-kv"].key_vault_uri, tenant_id: TENANT, client_id: CLIENT, identity_token_audience: "api://AzureADTokenExchange" };
    },
    name: (s) => `vault-${s.accessor}-${s.secret}`.replace(/[^0-9A-Za-z-]/g, "-"),
    value: (n) => azure.value(n),
    edit: (n, v) => azure.editOutOfBand(n, v),
  },
  {
    type: "cloudthree-sm",
    federate(dest) {
      const pool = POOL_PROVIDER.replace(/^\/\//, "").replace(/\/providers\/[^/]+$/, "");
      gcp.impersonators.set(SA, [...(gcp.impersonators.get(SA) ?? []), `principal://${pool}/subject/${sub("cloudthree-sm", dest)}`]);
      return { project_id: PROJECT, identity_token_audience: POOL_PROVIDER, service_account_email: SA };
    },
    name: (s) => `vault/${s.accessor}/${s.secret}`.replace(/[^A-Za-z0-9_-]/g, "_"),
    value: (n) => gcp.value(PROJECT, n),
    edit: (n, v) => gcp.editOutOfBand(PROJECT, n, v),
  },
];

async function entry(type: string, dest: string): Promise<Record<string, unknown>> {
  const e = Object.values(await entries(type, dest))[0];
  if (!e) throw new Error(`${type}: no association entry`);
  return e;
}

describe("keyless destinations: a full sync on each cloud type", () => {
  for (const kit of KITS) {
    it(`${kit.type}: set, update, drift repair and unsync with federation and no stored secret`, async () => {
      const dest = `wif-${uid()}`;
      await write(destPath(kit.type, dest), kit.federate(dest));
      const details = (await read(destPath(kit.type, dest))).body.data.connection_details as Record<string, unknown>;
      for (const f of ["access_key_id", "secret_access_key", "client_secret", "credentials"]) if (f in details) expect(details[f], f).toBe("");
      const s = await kvSecret({ k: "v1" }, `app-${uid()}`);
      const name = kit.name(s);
      const set = Object.values((await setAssoc(kit.type, dest, s)).body.data.associated_secrets)[0] as Record<string, unknown>;
      expect(set.sync_status, String(set.last_error)).toBe("SYNCED");
      expect(kit.value(name)).toBe('{"k":"v1"}');

      await write(`${s.mount}/data/${s.secret}`, { data: { k: "v2" } });
      await vi.waitFor(() => expect(kit.value(name)).toBe('{"k":"v2"}'), { timeout: 20_000, interval: 100 });

      kit.edit(name, "changed out of band");
      expect((await api("POST", `${destPath(kit.type, dest)}/reconcile`)).status).toBe(202);
      await vi.waitFor(() => expect(kit.value(name)).toBe('{"k":"v2"}'), { timeout: 20_000, interval: 100 });
      await vi.waitFor(async () => expect((await entry(kit.type, dest)).drift_count).toBe(1), { timeout: 20_000, interval: 100 });

      await removeAssoc(kit.type, dest, s);
      expect(kit.value(name)).toBeUndefined();
    });
  }

  it("temporary credentials are cached per destination and fetched again when they are about to expire", async () => {
    const kit = KITS[0] as Kit;
    /** A new federated destination, one association, one KV update synced: the STS exchanges it took. */
    const exchangesForOneSync = async (value: string): Promise<number> => {
      const dest = `wif-${uid()}`;
      await write(destPath(kit.type, dest), kit.federate(dest));
      const s = await kvSecret({ k: "a" }, `app-${uid()}`);
      const before = aws.assumeRoleWithWebIdentityCalls;
      await setAssoc(kit.type, dest, s);
      await write(`${s.mount}/data/${s.secret}`, { data: { k: value } });
      await vi.waitFor(() => expect(kit.value(kit.name(s))).toBe(`{"k":"${value}"}`), { timeout: 20_000, interval: 100 });
      return aws.assumeRoleWithWebIdentityCalls - before;
    };
    expect(await exchangesForOneSync("b")).toBe(1);

    // Credentials that expire within the refresh margin are never reused: each operation exchanges again.
    aws.sessionSeconds = 60;
    try {
      expect(await exchangesForOneSync("c")).toBeGreaterThanOrEqual(2);
    } finally {
      aws.sessionSeconds = 3600;
    }
  });
});

describe("keyless destinations: switching", () => {
  it("a PATCH sending one credential form clears the other (stored secret ⇄ federation)", async () => {
    const kit = KITS[1] as Kit;
    const dest = `switch-${uid()}`;
    await write(destPath(kit.type, dest), BODIES["cloudtwo-kv"]);
    const federated = kit.federate(dest);
    await patch(destPath(kit.type, dest), { identity_token_audience: federated.identity_token_audience });
    let details = (await read(destPath(kit.type, dest))).body.data.connection_details as Record<string, unknown>;
    expect([details.client_secret, details.identity_token_audience]).toEqual(["", "api://AzureADTokenExchange"]);
    const s = await kvSecret({ k: "sw" }, `app-${uid()}`);
    const e = Object.values((await setAssoc(kit.type, dest, s)).body.data.associated_secrets)[0] as Record<string, unknown>;
    expect(e.sync_status, String(e.last_error)).toBe("SYNCED");
    await patch(destPath(kit.type, dest), { client_secret: "another-client-secret-0123" });
    details = (await read(destPath(kit.type, dest))).body.data.connection_details as Record<string, unknown>;
    expect([details.client_secret, details.identity_token_audience]).toEqual(["*****", ""]);
    const both = await api("PATCH", destPath(kit.type, dest), { body: { client_secret: "x-0123456789", identity_token_audience: "api://AzureADTokenExchange" } });
    expect(both.status).toBe(400);
    expect(both.body.errors[0]).toMatch(/^client_secret: cannot be set together with identity_token_audience/);
  });
});

describe("keyless destinations: refusals", () => {
  it("stored credentials and federation together are a 400 naming the fields; federation needs its own fields", async () => {
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ["cloudone-sm", { ...BODIES["cloudone-sm"], role_arn: roleArn("x"), identity_token_audience: "sts.amazonaws.com" }, /^access_key_id, secret_access_key: cannot be set together with identity_token_audience/],
      ["cloudone-sm", { identity_token_audience: "sts.amazonaws.com" }, /^role_arn: is required with identity_token_audience/],
      ["cloudone-sm", { role_arn: roleArn("x"), identity_token_audience: "sts.amazonaws.com", external_id: "abc" }, /^external_id: cannot be used with identity_token_audience/],
      ["cloudone-sm", { role_arn: roleArn("x"), identity_token_ttl: "5m" }, /^identity_token_audience: is required with identity_token_ttl/],
      ["cloudone-sm", { role_arn: roleArn("x"), identity_token_audience: "sts.amazonaws.com", identity_token_ttl: "2h" }, /^identity_token_ttl: must be between/],
      ["cloudtwo-kv", { ...BODIES["cloudtwo-kv"], identity_token_audience: "api://AzureADTokenExchange" }, /^client_secret: cannot be set together with identity_token_audience/],
      ["cloudthree-sm", { ...BODIES["cloudthree-sm"], identity_token_audience: POOL_PROVIDER }, /^credentials: cannot be set together with identity_token_audience/],
      ["cloudthree-sm", { project_id: PROJECT, identity_token_audience: "https://example.com" }, /^identity_token_audience: must be the workload identity pool provider's resource name/],
      ["cloudthree-sm", { identity_token_audience: POOL_PROVIDER }, /^project_id: is required with identity_token_audience/],
    ];
    for (const [type, body, message] of cases) {
      const r = await api("POST", destPath(type, `bad-${uid()}`), { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.errors[0]).toMatch(message);
    }
  });

  async function refused(type: Kit["type"], body: Record<string, unknown>): Promise<string> {
    const dest = `no-${uid()}`;
    await write(destPath(type, dest), body);
    const s = await kvSecret({ k: "x" }, `app-${uid()}`);
    const e = Object.values((await setAssoc(type, dest, s)).body.data.associated_secrets)[0] as Record<string, unknown>;
    expect(e.sync_status).toBe("CLIENT_SIDE_ERROR");
    return String(e.last_error);
  }

  it("a refused exchange ends the operation with a last_error naming the step", async () => {
    const one = KITS[0] as Kit;
    const wrongAud = `no-${uid()}`;
    expect(await refused("cloudone-sm", { ...one.federate(wrongAud), identity_token_audience: "another-audience" })).toBe("InvalidIdentityToken: sts AssumeRoleWithWebIdentity: Incorrect token audience");
    // The role trusts another destination's subject: not assumable by this one.
    const other = `no-${uid()}`;
    one.federate(other);
    expect(await refused("cloudone-sm", { role_arn: roleArn(other), identity_token_audience: "sts.amazonaws.com" })).toMatch(/^AccessDenied: sts AssumeRoleWithWebIdentity: Not authorized/);
    // No federated credential on the app registration for this destination.
    expect(await refused("cloudtwo-kv", { key_vault_uri: BODIES["cloudtwo-kv"].key_vault_uri, tenant_id: TENANT, client_id: CLIENT, identity_token_audience: "api://AzureADTokenExchange" })).toMatch(
      /^invalid_client: identity provider \(federated client assertion\): AADSTS700213/,
    );
    const unknownPool = POOL_PROVIDER.replace("lanyard-pool", "other-pool");
    expect(await refused("cloudthree-sm", { project_id: PROJECT, identity_token_audience: unknownPool })).toMatch(/^invalid_target: sts token exchange: /);
    // Not granted workloadIdentityUser on the service account.
    expect(await refused("cloudthree-sm", { project_id: PROJECT, identity_token_audience: POOL_PROVIDER, service_account_email: `other@${PROJECT}.iam.gserviceaccount.com` })).toMatch(
      /^PERMISSION_DENIED: iamcredentials generateAccessToken: /,
    );
    // No issuer set: no token is made at all.
    await write("identity/oidc/config", { issuer: "" });
    try {
      const d = `no-${uid()}`;
      expect(await refused("cloudone-sm", one.federate(d))).toMatch(/^IdentityToken: identity token: no issuer is set/);
    } finally {
      await write("identity/oidc/config", { issuer: BASE });
    }
  });
});

describe("the fakes' token services", () => {
  /** A token as Lanyard's would look, signed with a key of the test's own. */
  async function forged(kid: string): Promise<string> {
    const pair = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign", "verify"])) as CryptoKeyPair;
    const part = (o: unknown) => btoa(JSON.stringify(o)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    const now = Math.floor(Date.now() / 1000);
    const input = `${part({ alg: "ES256", typ: "JWT", kid })}.${part({ iss: ISSUER, sub: sub("cloudone-sm", "forged"), aud: "sts.amazonaws.com", iat: now, nbf: now, exp: now + 300, jti: crypto.randomUUID() })}`;
    const sig = new Uint8Array(await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, pair.privateKey, new TextEncoder().encode(input)));
    return `${input}.${btoa(String.fromCharCode(...sig)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")}`;
  }

  async function assume(token: string): Promise<string> {
    aws.roles.set(roleArn("forged"), { trusted: [], webIdentity: { issuer: ISSUER, sub: sub("cloudone-sm", "forged") } });
    const body = new URLSearchParams({ Action: "AssumeRoleWithWebIdentity", Version: "2011-06-15", RoleArn: roleArn("forged"), RoleSessionName: "forged", WebIdentityToken: token });
    const res = await aws.handle(new Request("https://sts.us-east-1.amazonaws.com/", { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: body.toString() }));
    return `${res.status} ${await res.text()}`;
  }

  it("refuse a token signed by a key not in Lanyard's key set, or by another key under a published kid", async () => {
    expect(await assume(await forged("not-a-lanyard-key"))).toMatch(/^400 .*InvalidIdentityToken.*no key not-a-lanyard-key/);
    const published = (await api("GET", "identity/oidc/plugins/.well-known/keys", { token: null })).body.keys as { kid: string }[];
    const kid = published[0]?.kid ?? "";
    expect(kid).not.toBe("");
    expect(await assume(await forged(kid))).toMatch(/^400 .*InvalidIdentityToken.*signature verification failed/);
  });
});

describe("after the run", () => {
  it("no temporary credential and no private key material in any D1 row, log line or audit entry", async () => {
    const handedOut = [...aws.handedOut, ...azure.handedOut, ...gcp.handedOut];
    expect(handedOut.length).toBeGreaterThan(10);
    const keys = loadConfig(env).seal;
    const privateParts: string[] = [];
    for (const k of (await env.DB.prepare("SELECT kid, sealed_private_key FROM identity_keys").all<{ kid: string; sealed_private_key: string }>()).results) {
      const jwk = JSON.parse(await unseal(keys, k.sealed_private_key, `identity-key:${k.kid}`)) as { d: string };
      privateParts.push(jwk.d);
    }
    expect(privateParts.length).toBeGreaterThan(0);
    const tables = (await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'").all<{ name: string }>()).results;
    expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(["sync_destinations", "identity_keys", "sync_associations"]));
    const rows: string[] = [];
    for (const t of tables) rows.push(...(await env.DB.prepare(`SELECT * FROM "${t.name}"`).all()).results.map((r) => JSON.stringify(r)));
    const audited = logged.filter((l) => l.startsWith('{"id":'));
    expect(audited.length).toBeGreaterThan(0);
    const secrets = [...handedOut, ...privateParts];
    expect(rows.filter((r) => secrets.some((v) => r.includes(v)))).toEqual([]);
    expect(logged.filter((l) => secrets.some((v) => l.includes(v)))).toEqual([]);
  });
});
