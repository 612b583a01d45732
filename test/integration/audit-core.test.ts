/**
 * Audit core: sys/audit enable/list/disable (sudo, root namespace only, options read
 * back with header values masked, Vault's errors), sys/audit-hash (no sudo; equals the HMAC in
 * the entries), the entries of a scripted session (token create, KV write/read, PKI issue, a sync
 * destination's credentials, an AppRole login) with every secret the session used grepped for
 * in every entry, entries of refused requests, log_raw / hmac_accessor, and the "nothing lost"
 * rule: 503 and no work when no device could queue the request entry (a write, or a read that
 * changes state such as GET crl/rotate), 503 after the work when the response entry could not be
 * queued.
 * Entries are captured from the stdout device (console.log) and from the Queue messages of an
 * http device, through enqueue.ts's send seam (no real Queue send, no delivery).
 */
import { env } from "cloudflare:test";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { setAuditQueueSendForTests } from "../../src/audit/enqueue";
import type { AuditEntry } from "../../src/audit/types";
import { asQueued, type Queued } from "../helpers/audit-queue";
import { api, del, mount, read, ROOT, tokenWithPolicy, write } from "../helpers/api";
import { pkiWithRoot } from "../helpers/pki";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RSA_PKCS8_PEM } from "../helpers/sync-fixtures";

const HEADER_SECRET = "Bearer collector-secret-0123456789";

/** Everything the devices recorded since the last reset. */
const captured = { stdout: [] as AuditEntry[], queued: [] as Queued[] };
let failSend: ((m: Queued) => boolean) | null = null;
let logSpy: ReturnType<typeof vi.spyOn>;

beforeAll(() => {
  const original = console.log.bind(console);
  logSpy = vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
    const [first] = args;
    if (args.length === 1 && typeof first === "string" && first.startsWith('{"id":')) {
      const e = JSON.parse(first) as AuditEntry;
      if (e.type === "request" || e.type === "response") return void captured.stdout.push(e);
    }
    original(...args);
  });
  setAuditQueueSendForTests(async (_device, messages) => {
    for (const text of messages) {
      const m = asQueued(text);
      if (failSend?.(m)) throw new Error("queue unavailable (test)");
      captured.queued.push(m);
    }
  });
});
afterAll(() => {
  setAuditQueueSendForTests(null);
  logSpy.mockRestore();
});
afterEach(() => {
  failSend = null;
});

function reset(): void {
  captured.stdout.length = 0;
  captured.queued.length = 0;
}

/** Disables every device (so each test starts from none). */
async function disableAll(): Promise<void> {
  const r = await read("sys/audit");
  for (const p of Object.keys(r.body.data as object)) await del(`sys/audit/${p}`);
}

const queuedEntries = () => captured.queued.flatMap((m) => m.entries);

describe("sys/audit", () => {
  it("enable, list and disable need sudo; audit-hash does not", async () => {
    const plain = await tokenWithPolicy(`path "sys/audit*" { capabilities = ["create", "read", "update", "delete", "list"] }`);
    const sudo = await tokenWithPolicy(`path "sys/audit*" { capabilities = ["create", "read", "update", "delete", "list", "sudo"] }`);
    const p = `dev-${uid()}`;
    expect((await api("POST", `sys/audit/${p}`, { token: plain, body: { type: "stdout" } })).status).toBe(403);
    expect((await api("GET", "sys/audit", { token: plain })).status).toBe(403);
    await write(`sys/audit/${p}`, { type: "stdout", description: "to the log" }, { token: sudo }, 204);
    const r = await read("sys/audit", { token: sudo });
    expect(r.body.data[`${p}/`]).toEqual({ type: "stdout", description: "to the log", options: {}, local: false, path: `${p}/` });
    expect(r.body[`${p}/`]).toEqual(r.body.data[`${p}/`]);
    const h = await write(`sys/audit-hash/${p}`, { input: "x" }, { token: plain });
    expect(h.body.hash).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(h.body.data.hash).toBe(h.body.hash);
    expect((await api("DELETE", `sys/audit/${p}`, { token: plain })).status).toBe(403);
    await del(`sys/audit/${p}`, { token: sudo });
    await del(`sys/audit/${p}`, { token: sudo }); // Vault: 204 when missing too
    expect((await read("sys/audit")).body.data[`${p}/`]).toBeUndefined();
  });

  it("http options read back with header values as asterisks; the salt and headers are sealed at rest", async () => {
    const p = `http-${uid()}`;
    const options = { address: "http://127.0.0.1:9/collect", headers: { Authorization: HEADER_SECRET }, log_raw: "false", elide_list_responses: true, compress: true, color: "blue" };
    const enabled = await write(`sys/audit/${p}`, { type: "http", options });
    expect(enabled.body.warnings).toEqual(["options ignored by the http device type: color"]);
    const d = (await read("sys/audit")).body.data[`${p}/`];
    expect(d.options).toEqual({ address: "http://127.0.0.1:9/collect", headers: { Authorization: "********" }, log_raw: "false", elide_list_responses: "true", compress: "true" });
    expect(JSON.stringify(d)).not.toContain("collector-secret");
    const row = await env.DB.prepare("SELECT * FROM audit_devices WHERE path = ?").bind(`${p}/`).first<Record<string, string>>();
    expect(JSON.stringify(row)).not.toContain("collector-secret");
    expect(row?.sealed_salt).toMatch(/^v1:/);
    // Two devices hash one value differently (a salt each).
    const q = `stdout-${uid()}`;
    await write(`sys/audit/${q}`, { type: "stdout" }, {}, 204);
    const a = (await write(`sys/audit-hash/${p}`, { input: "same" })).body.hash;
    const b = (await write(`sys/audit-hash/${q}`, { input: "same" })).body.hash;
    expect(a).not.toBe(b);
    expect((await write(`sys/audit-hash/${p}`, { input: "same" })).body.hash).toBe(a);
    const r2 = `r2-${uid()}`;
    await write(`sys/audit/${r2}`, { type: "r2" }, {}, 204);
    expect((await read("sys/audit")).body.data[`${r2}/`].options).toEqual({ prefix: "audit/" });
    await disableAll();
  });

  it("refuses bad input with Vault's messages, naming the field; child namespaces cannot manage devices", async () => {
    const p = `bad-${uid()}`;
    const bad = async (body: unknown, message: RegExp) => {
      const r = await api("POST", `sys/audit/${p}`, { body });
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.errors[0]).toMatch(message);
    };
    await bad({}, /^type: required/);
    await bad({ type: "file" }, /^type: unknown audit device type "file"/);
    await bad({ type: "http" }, /^options\.address: required/);
    await bad({ type: "http", options: { address: "ftp://x/" } }, /^options\.address: the scheme/);
    await bad({ type: "http", options: { address: "https://u:pw@x/" } }, /^options\.address: put credentials/);
    await bad({ type: "http", options: { address: "https://x/", headers: { "Bad Name": "v" } } }, /^options\.headers: invalid header name/);
    await bad({ type: "stdout", options: { log_raw: "maybe" } }, /^options\.log_raw: expected a boolean/);
    await bad({ type: "stdout", options: { format: "jsonx" } }, /^options\.format/);
    await bad({ type: "http", options: { address: "https://x/", compress: "gzip" } }, /^options\.compress: expected a boolean/);
    await write(`sys/audit/${p}`, { type: "stdout" }, {}, 204);
    await bad({ type: "stdout" }, new RegExp(`^path already in use: ${p}/`));
    expect((await api("POST", `sys/audit-hash/${p}`, { body: {} })).body.errors).toEqual(['the "input" parameter is empty']);
    expect((await api("POST", "sys/audit-hash/nope", { body: { input: "x" } })).body.errors).toEqual(['unknown audit backend "nope/"']);
    await write("sys/namespaces/team", {});
    const child = await api("POST", `sys/audit/c-${uid()}`, { namespace: "team", body: { type: "stdout" } });
    expect(child.status).toBe(400);
    expect(child.body.errors[0]).toMatch(/cluster-wide/);
    await disableAll();
  });
});

describe("entries", () => {
  let http = "";
  let out = "";
  beforeAll(async () => {
    await disableAll();
    http = `http-${uid()}`;
    out = `out-${uid()}`;
    await write(`sys/audit/${http}`, { type: "http", options: { address: "http://127.0.0.1:9/c", headers: { Authorization: HEADER_SECRET } } }, {}, 204);
    await write(`sys/audit/${out}`, { type: "stdout" }, {}, 204);
  });
  afterAll(disableAll);

  it("a scripted session: every secret HMAC'd in every entry; audit-hash finds them; request before response", async () => {
    reset();
    const secrets: string[] = [ROOT, HEADER_SECRET, SECRETS.awsKey, SECRETS.awsSecret];
    // Token create: the new token and its accessor are in the response's auth block.
    const t = await write("auth/token/create", { policies: ["default"], meta: { team: "blue" } });
    const token = t.body.auth.client_token as string;
    const accessor = t.body.auth.accessor as string;
    secrets.push(token, accessor);
    await read("auth/token/lookup-self", { token });
    // KV write and read.
    const kv = await mount("kv");
    const kvValue = `kv-value-${crypto.randomUUID()}`;
    const kvWrite = await write(`${kv}/data/app`, { data: { password: kvValue, nested: { list: [kvValue] } } });
    await read(`${kv}/data/app`);
    secrets.push(kvValue);
    // PKI issue: the private key of the new certificate.
    const pki = await pkiWithRoot();
    await write(`${pki.path}/roles/web`, { allowed_domains: "example.com", allow_subdomains: true }, {}, 200);
    const issued = await write(`${pki.path}/issue/web`, { common_name: "a.example.com" });
    const privateKey = issued.body.data.private_key as string;
    secrets.push(privateKey, privateKey.split("\n")[1] as string);
    // A sync destination's credentials, and a repository-host app's private key.
    await write(`sys/sync/destinations/cloudone-sm/d-${uid()}`, BODIES["cloudone-sm"]);
    await write(`sys/sync/repohost-apps/app-${uid()}`, { app_id: "123456", private_key: RSA_PKCS8_PEM });
    secrets.push(RSA_PKCS8_PEM, RSA_PKCS8_PEM.split("\n")[1] as string);
    // AppRole: SecretID and the login's token.
    const ar = `approle-${uid()}`;
    await write(`sys/auth/${ar}`, { type: "approle" }, {}, 204);
    await write(`auth/${ar}/role/r`, { token_policies: "default" }, {}, 204);
    const roleId = (await read(`auth/${ar}/role/r/role-id`)).body.data.role_id as string;
    const secretId = (await write(`auth/${ar}/role/r/secret-id`, {})).body.data.secret_id as string;
    const login = await api("POST", `auth/${ar}/login`, { token: null, body: { role_id: roleId, secret_id: secretId } });
    expect(login.status).toBe(200);
    secrets.push(roleId, secretId, login.body.auth.client_token as string);
    // A token in a path (Vault's path form, not served here): a 404 whose entry hides it.
    expect((await api("GET", `auth/token/lookup/${token}`)).status).toBe(404);

    const stdout = captured.stdout;
    const queued = queuedEntries();
    expect(stdout.length).toBeGreaterThan(20);
    const all = JSON.stringify([stdout, captured.queued]);
    for (const s of secrets) {
      const at = all.indexOf(s);
      expect(at, `secret ${s.slice(0, 12)}… in an entry: ${all.slice(Math.max(0, at - 300), at + 80)}`).toBe(-1);
    }

    // The queued device's HMACs are what sys/audit-hash gives for that device.
    const hashOn = async (dev: string, input: string) => (await write(`sys/audit-hash/${dev}`, { input })).body.hash as string;
    const kvEntries = queued.filter((e) => e.request.id === kvWrite.body.request_id);
    expect(kvEntries.map((e) => e.type)).toEqual(["request", "response"]);
    const req = kvEntries[0] as AuditEntry;
    expect(req.request).toMatchObject({ operation: "create", path: `${kv}/data/app`, mount_type: "kv", mount_point: `${kv}/`, namespace: { id: "root", path: "" } });
    const data = req.request.data as { data: { password: string; nested: { list: string[] } } };
    expect(data.data.password).toBe(await hashOn(http, kvValue));
    expect(data.data.nested.list[0]).toBe(data.data.password);
    expect(req.auth?.client_token).toBe(await hashOn(http, ROOT));
    expect(req.auth?.policies).toEqual(["root"]);
    // The stdout device: its own salt, the same shape.
    const outReq = stdout.find((e) => e.id === `${kvWrite.body.request_id}:request`);
    expect((outReq?.request.data as typeof data).data.password).toBe(await hashOn(out, kvValue));
    expect((outReq?.request.data as typeof data).data.password).not.toBe(data.data.password);
    // The private key is HMAC'd in the response data; timestamps (RFC3339) stay readable.
    const issueResp = queued.find((e) => e.type === "response" && e.request.id === issued.body.request_id);
    expect((issueResp?.response?.data as Record<string, string>).private_key).toBe(await hashOn(http, privateKey));
    // Token create: response.auth has the token and accessor HMAC'd; metadata is not hashed.
    const created = queued.find((e) => e.type === "response" && e.request.id === t.body.request_id);
    expect(created?.response?.auth).toMatchObject({ client_token: await hashOn(http, token), accessor: await hashOn(http, accessor) });
    // The login (no token presented): logged, SecretID HMAC'd.
    const loginReq = queued.find((e) => e.type === "request" && e.request.id === login.body.request_id);
    expect((loginReq?.request.data as Record<string, string>).secret_id).toBe(await hashOn(http, secretId));
    expect(loginReq?.request.client_token).toBeUndefined();
    // Every request entry precedes its response (stdout and queued), each exactly once.
    const seen = new Set<string>();
    for (const e of stdout) {
      if (e.type === "request") seen.add(e.request.id);
      else expect(seen.has(e.request.id), e.request.path).toBe(true);
    }
    const queuedSeen = new Set<string>();
    for (const e of queued) {
      expect(queuedSeen.has(e.id), `${e.id} queued twice`).toBe(false);
      queuedSeen.add(e.id);
      if (e.type === "response") expect(queuedSeen.has(`${e.request.id}:request`), e.request.path).toBe(true);
    }
    for (const m of captured.queued) expect(m.device).toMatchObject({ path: `${http}/`, type: "http" });
    // Ids are stable: <request id>:request / :response.
    expect(kvEntries.map((e) => e.id)).toEqual([`${kvWrite.body.request_id}:request`, `${kvWrite.body.request_id}:response`]);
  });

  it("refused requests are logged too: request and response with the error", async () => {
    reset();
    const r = await api("GET", "sys/mounts", { token: "not-a-token-0123456789" });
    expect(r.status).toBe(403);
    const got = queuedEntries().filter((e) => e.request.id === r.headers.get("x-request-id"));
    expect(got.map((e) => e.type)).toEqual(["request", "response"]);
    expect(got[1]?.error).toBe("permission denied");
    expect(got[1]?.response?.status_code).toBe(403);
    expect(got[0]?.auth?.policy_results).toEqual({ allowed: false });
    expect(JSON.stringify(got)).not.toContain("not-a-token-0123456789");
    expect(got[0]?.request.client_token).toBe((await write(`sys/audit-hash/${http}`, { input: "not-a-token-0123456789" })).body.hash);
    const missing = await api("GET", `nope-${uid()}/x`);
    expect(missing.status).toBe(404);
    expect(queuedEntries().some((e) => e.type === "response" && e.request.id === missing.headers.get("x-request-id") && e.response?.status_code === 404)).toBe(true);
  });

  it("numbers are HMAC'd by their JSON text; booleans, null and timestamps stay in the clear", async () => {
    reset();
    const kv = await mount("kv");
    const stamp = "2026-11-28T08:00:00Z";
    const w = await write(`${kv}/data/pin`, { data: { pin: 4713369021, ratio: 0.5, list: [7], on: true, off: null, at: stamp } });
    const r = await read(`${kv}/data/pin`);
    const hashOn = async (input: string) => (await write(`sys/audit-hash/${http}`, { input })).body.hash as string;
    const req = queuedEntries().find((e) => e.type === "request" && e.request.id === w.body.request_id);
    const resp = queuedEntries().find((e) => e.type === "response" && e.request.id === r.body.request_id);
    const want = { pin: await hashOn("4713369021"), ratio: await hashOn("0.5"), list: [await hashOn("7")], on: true, off: null, at: stamp };
    expect((req?.request.data as { data: unknown }).data).toEqual(want);
    expect(((resp?.response?.data as { data: unknown }).data)).toEqual(want);
    expect(JSON.stringify([captured.stdout, captured.queued])).not.toContain("4713369021");
  });

  it("raw answers are logged as Vault's http_raw_body, HMAC'd", async () => {
    reset();
    const pki = await pkiWithRoot();
    const res = await api("GET", `${pki.path}/ca/pem`, { token: null });
    expect(res.status).toBe(200);
    const resp = queuedEntries().find((e) => e.type === "response" && e.request.path === `${pki.path}/ca/pem`);
    expect(resp?.response?.data).toMatchObject({ http_status_code: 200, http_raw_body: expect.stringMatching(/^hmac-sha256:/) });
    expect(JSON.stringify(resp)).not.toContain("BEGIN CERTIFICATE");
  });
});

describe("options", () => {
  afterAll(disableAll);
  it("log_raw leaves values in the clear; hmac_accessor=false leaves accessors; elide_list_responses counts keys", async () => {
    await disableAll();
    const raw = `raw-${uid()}`;
    const acc = `acc-${uid()}`;
    await write(`sys/audit/${raw}`, { type: "stdout", options: { log_raw: true } }, {}, 204);
    await write(`sys/audit/${acc}`, { type: "http", options: { address: "https://collector.example/", hmac_accessor: "false", elide_list_responses: "true" } }, {}, 204);
    reset();
    const t = await write("auth/token/create", { policies: ["default"] });
    const kv = await mount("kv");
    await write(`${kv}/data/a`, { data: { v: "clear-value" } });
    await write(`${kv}/data/b`, { data: { v: "x" } });
    const l = await api("GET", `${kv}/metadata/?list=true`);
    const rawResp = captured.stdout.find((e) => e.type === "response" && e.request.id === t.body.request_id);
    expect(rawResp?.response?.auth?.client_token).toBe(t.body.auth.client_token);
    expect(JSON.stringify(captured.stdout)).toContain("clear-value");
    const accResp = queuedEntries().find((e) => e.type === "response" && e.request.id === t.body.request_id);
    expect(accResp?.response?.auth?.accessor).toBe(t.body.auth.accessor);
    expect(accResp?.response?.auth?.client_token).toMatch(/^hmac-sha256:/);
    const listed = queuedEntries().find((e) => e.type === "response" && e.request.id === l.body.request_id);
    expect(listed?.response?.data).toEqual({ keys: 2 });
  });
});

describe("nothing lost", () => {
  let http = "";
  beforeAll(async () => {
    await disableAll();
    http = `only-${uid()}`;
    await write(`sys/audit/${http}`, { type: "http", options: { address: "https://collector.example/" } }, {}, 204);
  });
  afterAll(disableAll);

  it("no device could queue the request entry: 503 and the handler does not run", async () => {
    const kv = await mount("kv");
    failSend = () => true;
    const r = await api("POST", `${kv}/data/lost`, { body: { data: { a: "1" } } });
    expect(r.status).toBe(503);
    expect(r.body).toEqual({ errors: ["audit: no device could record this request"] });
    failSend = null;
    expect((await api("GET", `${kv}/data/lost`)).status).toBe(404);
  });

  it("a read hands its request and response entries over together, request first; a write queues its request entry before the work", async () => {
    const kv = await mount("kv");
    await write(`${kv}/data/pair`, { data: { a: "1" } });
    reset();
    const w = await api("POST", `${kv}/data/pair`, { body: { data: { a: "2" } } });
    const r = await read(`${kv}/data/pair`);
    const holding = (id: string) => captured.queued.filter((m) => m.entries.some((e) => e.request.id === id));
    // The read: one message, its request entry just before its response entry, the stable ids.
    const [readMsg, ...more] = holding(r.body.request_id);
    expect(more).toEqual([]);
    const ids = readMsg?.entries.filter((e) => e.request.id === r.body.request_id).map((e) => e.id);
    expect(ids).toEqual([`${r.body.request_id}:request`, `${r.body.request_id}:response`]);
    // The write: its request entry in a message of its own, queued before the response entry's.
    const writeMsgs = holding(w.body.request_id);
    expect(writeMsgs.map((m) => m.entries.filter((e) => e.request.id === w.body.request_id).map((e) => e.type))).toEqual([["request"], ["response"]]);
  });

  it("a read that changes state (GET crl/rotate) queues its request entry before the work: no rebuild when it cannot", async () => {
    const { path } = await pkiWithRoot();
    const crlNumber = async () =>
      (await env.DB.prepare("SELECT max(c.number) AS n FROM pki_crls c JOIN mounts m ON m.id = c.mount_id WHERE m.path = ?").bind(`${path}/`).first<{ n: number | null }>())?.n ?? 0;
    expect((await read(`${path}/crl/rotate`)).body.data.success).toBe(true);
    const before = await crlNumber();
    failSend = () => true;
    const r = await api("GET", `${path}/crl/rotate`);
    failSend = null;
    expect(r.status).toBe(503);
    expect(await crlNumber()).toBe(before);
    // Its request entry travels alone, ahead of the work; the response entry follows in its own message.
    reset();
    const ok = await read(`${path}/crl/rotate`);
    expect(await crlNumber()).toBeGreaterThan(before);
    const holding = captured.queued.filter((m) => m.entries.some((e) => e.request.id === ok.body.request_id));
    expect(holding.map((m) => m.entries.filter((e) => e.request.id === ok.body.request_id).map((e) => e.type))).toEqual([["request"], ["response"]]);
  });

  it("a read whose entries cannot be queued: 503 and nothing of the answer disclosed", async () => {
    const kv = await mount("kv");
    await write(`${kv}/data/hidden`, { data: { secret: "never-shown-0123" } });
    failSend = () => true;
    const r = await api("GET", `${kv}/data/hidden`);
    expect(r.status).toBe(503);
    expect(r.body).toEqual({ errors: ["audit: no device could record this request"] });
    expect(JSON.stringify(r.body)).not.toContain("never-shown");
  });

  it("the response entry could not be queued: 503 after the work, as Vault", async () => {
    const kv = await mount("kv");
    failSend = (m) => m.entries.some((e) => e.type === "response");
    const r = await api("POST", `${kv}/data/done`, { body: { data: { a: "1" } } });
    expect(r.status).toBe(503);
    failSend = null;
    expect((await read(`${kv}/data/done`)).body.data.data).toEqual({ a: "1" });
  });

  it("one device that records is enough; a refused request whose log fails keeps its own error", async () => {
    const kv = await mount("kv");
    const out = `out-${uid()}`;
    await write(`sys/audit/${out}`, { type: "stdout" }, {}, 204);
    failSend = () => true;
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      expect((await api("POST", `${kv}/data/ok`, { body: { data: { a: "1" } } })).status).toBe(200);
      await del(`sys/audit/${out}`);
      expect((await api("GET", "sys/mounts", { token: "bad-token-0123456789" })).status).toBe(403);
      expect(errors.mock.calls.some((c) => String(c[0]).includes("could not be logged by any device"))).toBe(true);
    } finally {
      errors.mockRestore();
    }
  });

  it("with no device enabled nothing is queued or required", async () => {
    await disableAll();
    reset();
    failSend = () => true;
    const kv = await mount("kv");
    await write(`${kv}/data/x`, { data: { a: "1" } });
    expect(captured.queued).toEqual([]);
    expect(captured.stdout).toEqual([]);
  });
});
