/**
 * Layer 0 of the public PKI reads (src/core/public-answers.ts), through the Worker with caching
 * on (CACHE_TTL_MS 1000): a repeated public GET is answered before the pipeline, and every rule
 * the pipeline applies still holds for it — a revocation, a disabled mount, another namespace,
 * X-Vault-Wrap-TTL and an enabled audit device each change the next answer at once.
 */
import { SELF } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { answerSlot, servedAnswer } from "../../src/core/public-answers";
import type { AuditEntry } from "../../src/audit/types";
import { del, mount, read, write } from "../helpers/api";
import { parseResponse, requestFor, toBase64 } from "../helpers/ocsp";
import { pkiWithRoot, x509 } from "../helpers/pki";

const BASE = "http://lanyard.test/v1/";
const get = (path: string, headers: Record<string, string> = {}) => SELF.fetch(`${BASE}${path}`, { headers });

/** Whether layer 0 holds an answer for this GET (the Worker and the tests share the isolate). */
function inLayer0(path: string, namespace: string | null = null): boolean {
  const slot = answerSlot("GET", new URL(`${BASE}${path}`), namespace, new Headers(), true);
  return slot !== null && servedAnswer(slot, new Headers(), Date.now()) !== null;
}

/**
 * GETs `path` until layer 0 holds it, at most three times: a first read may write (a CRL built on
 * first use invalidates "pki"), and an answer read across an invalidation is not kept; and a GET
 * that finds the isolate's audit device list expired (1 s) is not kept either (the list is read
 * by the pipeline, after layer 0 looked), which a loaded machine can make happen at any GET.
 */
async function warm(path: string, headers: Record<string, string> = {}): Promise<void> {
  const namespace = headers["x-service-namespace"] ?? null;
  for (let i = 0; i < 3 && !inLayer0(path, namespace); i++) await (await get(path, headers)).arrayBuffer();
}

function certStatus(body: ArrayBuffer): string {
  const s = parseResponse(new Uint8Array(body)).basic?.tbsResponseData.responses[0]?.certStatus;
  return s?.good !== undefined ? "good" : s?.revoked ? "revoked" : "unknown";
}

async function setup() {
  const ctx = await pkiWithRoot();
  await write(`${ctx.path}/roles/r`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
  const leaf = await write(`${ctx.path}/issue/r`, { common_name: "leaf.example", ttl: "1h" });
  const der = await requestFor(ctx.root, leaf.body.data.certificate as string);
  return { ...ctx, serial: leaf.body.data.serial_number as string, ocsp: `${ctx.path}/ocsp/${encodeURIComponent(toBase64(der))}` };
}

describe("layer 0: repeated public GETs", () => {
  it("a repeated OCSP GET and CRL are answered from layer 0, and a revocation shows at once in both", async () => {
    const { path, serial, ocsp } = await setup();
    expect(certStatus(await (await get(ocsp)).arrayBuffer())).toBe("good");
    expect((await get(`${path}/crl`)).status).toBe(200);
    await warm(ocsp);
    await warm(`${path}/crl`);
    expect(inLayer0(ocsp)).toBe(true);
    expect(inLayer0(`${path}/crl`)).toBe(true);
    const again = await get(ocsp);
    expect(again.headers.get("cache-control")).toMatch(/^public, max-age=[01], no-transform, must-revalidate$/);
    expect(certStatus(await again.arrayBuffer())).toBe("good");

    await write(`${path}/revoke`, { serial_number: serial });
    expect(inLayer0(ocsp)).toBe(false);
    expect(certStatus(await (await get(ocsp)).arrayBuffer())).toBe("revoked");
    const crl = new x509.X509Crl(await (await get(`${path}/crl`)).arrayBuffer());
    expect(crl.entries.map((e) => e.serialNumber.toLowerCase().replace(/^0+/, ""))).toContain(serial.replace(/:/g, "").replace(/^0+/, ""));
  });

  it("holds only public reads: a read that needs a token always goes through the pipeline", async () => {
    const { path, serial } = await setup();
    await warm(`${path}/ca/pem`);
    expect(inLayer0(`${path}/ca/pem`)).toBe(true);
    // A public read that is not cached (its revocation fields are read each time) is not held.
    await warm(`${path}/cert/${serial}`);
    expect(inLayer0(`${path}/cert/${serial}`)).toBe(false);
    for (const p of [`${path}/roles/r`, `${path}/config/crl`, `${path}/keys?list=true`]) {
      for (let i = 0; i < 2; i++) expect((await read(p)).status, p).toBe(200);
      expect(inLayer0(p), p).toBe(false);
      // Without a token the pipeline refuses it, whatever was answered before.
      expect((await get(p)).status, p).toBe(403);
    }
  });

  it("answers 304 to If-None-Match from layer 0 with the ETag the pipeline gave", async () => {
    const { path } = await setup();
    await warm(`${path}/ca`);
    const first = await get(`${path}/ca`);
    const etag = first.headers.get("etag") ?? "";
    await first.arrayBuffer();
    expect(inLayer0(`${path}/ca`)).toBe(true);
    const second = await get(`${path}/ca`, { "if-none-match": etag });
    expect(second.status).toBe(304);
    expect(second.headers.get("etag")).toBe(etag);
  });

  it("a disabled mount, X-Vault-Wrap-TTL and another namespace are refused as the pipeline refuses them", async () => {
    const { path } = await setup();
    await warm(`${path}/crl`);
    expect(inLayer0(`${path}/crl`)).toBe(true);
    expect((await get(`${path}/crl`, { "x-vault-wrap-ttl": "30s" })).status).toBe(400);
    const elsewhere = await get(`${path}/crl`, { "x-service-namespace": "no-such-team/" });
    expect(elsewhere.status).toBe(403);
    await del(`sys/mounts/${path}`);
    expect((await get(`${path}/crl`)).status).not.toBe(200);
  });

  it("a mount in a namespace is kept apart from the same path in the root namespace", async () => {
    const ns = `team-${crypto.randomUUID().slice(0, 6)}`;
    await write(`sys/namespaces/${ns}`, {});
    const path = await mount("pki");
    await del(`sys/mounts/${path}`);
    await write(`sys/mounts/${path}`, { type: "pki" }, { namespace: ns }, 204);
    await write(`${path}/root/generate/internal`, { common_name: "NS Root", key_type: "ec", issuer_name: "root" }, { namespace: ns });
    const inNs = await get(`${path}/ca/pem`, { "x-service-namespace": ns });
    expect(inNs.status).toBe(200);
    expect(await inNs.text()).toContain("BEGIN CERTIFICATE");
    await warm(`${path}/ca/pem`, { "x-service-namespace": ns });
    expect(inLayer0(`${path}/ca/pem`, ns)).toBe(true);
    expect((await get(`${path}/ca/pem`)).status).not.toBe(200);
  });
});

describe("layer 0 and the audit trail", () => {
  const seen: AuditEntry[] = [];
  let spy: ReturnType<typeof vi.spyOn>;
  beforeAll(() => {
    const original = console.log.bind(console);
    spy = vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => {
      const [first] = args;
      if (typeof first === "string" && first.startsWith('{"id":')) return void seen.push(JSON.parse(first) as AuditEntry);
      original(...args);
    });
  });
  afterAll(() => spy.mockRestore());

  it("with every device's filter leaving the public read out, layer 0 serves it again; a device without one brings the pipeline back", async () => {
    const { path, ocsp } = await setup();
    const quiet = `l0q-${crypto.randomUUID().slice(0, 6)}`;
    const loud = `l0l-${crypto.randomUUID().slice(0, 6)}`;
    await write(`sys/audit/${quiet}`, { type: "stdout", options: { filter: 'not (path matches "/ocsp/")' } }, {}, 204);
    try {
      await read("sys/audit"); // the device list, fresh in this isolate
      seen.length = 0;
      await warm(ocsp);
      expect(inLayer0(ocsp)).toBe(true);
      const res = await get(ocsp);
      expect(res.headers.get("cache-control")).toMatch(/^public, max-age=[01]/);
      await res.arrayBuffer();
      expect(seen.filter((e) => e.request?.path?.includes("/ocsp/"))).toEqual([]);
      // The CA read is not excluded by that filter: it goes through the pipeline and is audited.
      await warm(`${path}/ca/pem`);
      expect(seen.some((e) => e.type === "response" && e.request?.path === `${path}/ca/pem`)).toBe(true);
      seen.length = 0;
      await (await get(`${path}/ca/pem`)).arrayBuffer();
      expect(seen.some((e) => e.type === "request" && e.request?.path === `${path}/ca/pem`)).toBe(true);
      // A second device without a filter: the OCSP read is audited again, by that device only.
      await write(`sys/audit/${loud}`, { type: "stdout" }, {}, 204);
      seen.length = 0;
      await (await get(ocsp)).arrayBuffer();
      expect(seen.filter((e) => e.request?.path?.includes("/ocsp/")).map((e) => e.type)).toEqual(["request", "response"]);
    } finally {
      await del(`sys/audit/${quiet}`);
      await del(`sys/audit/${loud}`);
    }
  });

  it("once a device is enabled, a GET layer 0 held is audited again", async () => {
    const { ocsp } = await setup();
    // The device list is read on the pipeline's first batch; with none, layer 0 answers.
    await read("sys/audit");
    await warm(ocsp);
    expect(inLayer0(ocsp)).toBe(true);
    const device = `l0-${crypto.randomUUID().slice(0, 6)}`;
    await write(`sys/audit/${device}`, { type: "stdout" }, {}, 204);
    try {
      seen.length = 0;
      const res = await get(ocsp);
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      expect(seen.some((e) => e.type === "request" && e.request?.path?.includes("/ocsp/"))).toBe(true);
    } finally {
      await del(`sys/audit/${device}`);
    }
  });
});
