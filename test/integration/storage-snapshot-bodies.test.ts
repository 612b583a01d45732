/**
 * Storage snapshots carry the certificate bodies of the CERTS bucket (docs/operations.md
 * "Snapshots"; format: src/core/db/snapshot-format.ts, version 2). Leaves issued with their DER
 * in R2 are saved, then D1 and the bucket are both emptied (a new deployment: the restore is
 * forced), and after the restore `cert/<serial>` answers the very DER issue returned (compared
 * byte for byte, and parsed with @peculiar/asn1-x509, an independent parser), a revocation by
 * serial works and the CRL lists it. A changed body and a dropped page of bodies are refused as
 * corrupt with nothing changed, in D1 or in the bucket; a version-1 snapshot (no bodies, its MAC
 * chain computed here with WebCrypto, independently of the module) still restores and leaves
 * the bucket as it is; the bodies count towards MAX_SNAPSHOT_BYTES; a put that fails mid-restore
 * fails it before the rows are swapped.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { AsnParser } from "@peculiar/asn1-schema";
import { Certificate, CertificateList } from "@peculiar/asn1-x509";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app/app";
import { api, read, ROOT, write } from "../helpers/api";
import { pkiWithRoot, x509 } from "../helpers/pki";
import { dumpTables } from "../helpers/db-dump";

const bytesOf = async (s: ReadableStream<Uint8Array>) => new Uint8Array(await new Response(s).arrayBuffer());
const gunzip = (b: Uint8Array) => bytesOf(new Blob([b]).stream().pipeThrough(new DecompressionStream("gzip")));
const hex = (b: ArrayBuffer | Uint8Array) => Buffer.from(b instanceof Uint8Array ? b : new Uint8Array(b)).toString("hex");
const derOf = (pem: string) => new Uint8Array(x509.PemConverter.decodeFirst(pem));

const dump = dumpTables;

/** An object's bytes as hex ("" when there is none). */
async function bodyHex(key: string): Promise<string> {
  const obj = await env.CERTS.get(key);
  return obj ? hex(await obj.arrayBuffer()) : "";
}

/** Every object of the CERTS bucket: key → hex of its bytes. */
async function bucket(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  let cursor: string | undefined;
  do {
    const page = await env.CERTS.list(cursor ? { cursor } : {});
    for (const o of page.objects) out[o.key] = await bodyHex(o.key);
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return out;
}

async function emptyBucket(): Promise<void> {
  const keys = Object.keys(await bucket());
  if (keys.length > 0) await env.CERTS.delete(keys);
}

/** POST to the snapshot paths through app.fetch, so a test can hand the Worker another CERTS binding. */
async function restore(body: Uint8Array | string, opts: { force?: boolean; certs?: R2Bucket; vars?: Partial<Env> } = {}): Promise<{ status: number; text: string }> {
  const ctx = createExecutionContext();
  const req = new Request(`http://x/v1/sys/storage/raft/snapshot${opts.force ? "-force" : ""}`, { method: "POST", headers: { "x-service-token": ROOT }, body });
  const res = await app.fetch(req, { ...env, ...opts.vars, ...(opts.certs ? { CERTS: opts.certs } : {}) }, ctx);
  await waitOnExecutionContext(ctx);
  return { status: res.status, text: await res.text() };
}

/** GET sys/storage/raft/snapshot: the gzip bytes and the lines inside. */
async function saveLines(): Promise<{ snap: Uint8Array; lines: string[] }> {
  const ctx = createExecutionContext();
  const raw = await app.fetch(new Request("http://x/v1/sys/storage/raft/snapshot", { headers: { "x-service-token": ROOT } }), env, ctx);
  expect(raw.status).toBe(200);
  const snap = new Uint8Array(await raw.arrayBuffer());
  await waitOnExecutionContext(ctx);
  return { snap, lines: new TextDecoder().decode(await gunzip(snap)).trimEnd().split("\n") };
}

const utf8 = (s: string) => new TextEncoder().encode(s);

/** The MAC chain of the format, computed here from its description (HKDF-SHA-256 key, chained HMAC-SHA-256). */
async function chainMac(lines: string[]): Promise<string> {
  const raw = Uint8Array.from(atob(env.SEAL_KEY ?? ""), (c) => c.charCodeAt(0));
  const ikm = await crypto.subtle.importKey("raw", raw, "HKDF", false, ["deriveKey"]);
  const key = await crypto.subtle.deriveKey({ name: "HKDF", hash: "SHA-256", salt: utf8("lanyard storage snapshot"), info: utf8("snapshot-mac v1") }, ikm, { name: "HMAC", hash: "SHA-256", length: 256 }, false, ["sign"]);
  let mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, utf8("lanyard-snapshot:v1")));
  for (const line of lines) {
    const l = utf8(line);
    const joined = new Uint8Array(mac.length + l.length);
    joined.set(mac);
    joined.set(l, mac.length);
    mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, joined));
  }
  return hex(mac);
}

/** The serial as the CRL and the certificate carry it (DER INTEGER content), as colon hex. */
const colonHex = (b: ArrayBuffer) => hex(b).replace(/^00/, "").match(/../g)?.join(":") ?? "";

interface Fixture {
  path: string;
  mountId: string;
  leaves: { serial: string; der: Uint8Array }[];
}
let fx: Fixture;

describe("storage snapshots carry the certificate bodies", () => {
  it("issue, save, lose D1 and the bucket, force-restore: cert/<serial> is the issued DER, revoke by serial reaches the CRL", async () => {
    const ca = await pkiWithRoot();
    await write(`${ca.path}/roles/web`, { allowed_domains: "example.com", allow_subdomains: true, max_ttl: "72h" });
    const mountId = (await env.DB.prepare("SELECT id FROM mounts WHERE path = ?").bind(`${ca.path}/`).first<{ id: string }>())?.id ?? "";
    const leaves: Fixture["leaves"] = [];
    for (const cn of ["a", "b", "c", "d"]) {
      const d = (await write(`${ca.path}/issue/web`, { common_name: `${cn}.example.com`, ttl: "1h", key_type: cn === "d" ? "rsa" : "ec", key_bits: cn === "d" ? 2048 : 256 })).body.data;
      leaves.push({ serial: d.serial_number, der: derOf(d.certificate) });
    }
    fx = { path: ca.path, mountId, leaves };
    // The bodies are in R2 (the issue answered once its body was stored).
    for (const l of leaves) expect(await bodyHex(`${mountId}/${l.serial}`)).toBe(hex(l.der));

    const { snap, lines } = await saveLines();
    expect(JSON.parse(lines[0] ?? "")).toMatchObject({ version: 2 });
    const section = lines.findIndex((l) => l === '{"objects":"CERTS"}');
    const lastTable = lines.map((l) => l.startsWith('{"table"')).lastIndexOf(true);
    expect(section).toBeGreaterThan(lastTable);
    const items = lines.slice(section + 1, -1).flatMap((l) => (JSON.parse(l) as { items: [string, string, string | null][] }).items);
    expect(items.map((i) => i[0])).toEqual(expect.arrayContaining(leaves.map((l) => `${mountId}/${l.serial}`)));
    expect(JSON.parse(lines.at(-1) ?? "")).toMatchObject({ end: true, objects: items.length });

    // A new deployment: every table empty, the bucket empty, another identity.
    const before = await dump();
    for (const name of Object.keys(before)) await env.DB.prepare(`DELETE FROM "${name}"`).run();
    await emptyBucket();
    await env.DB.prepare("UPDATE deployment_identity SET deployment_id = 'elsewhere' WHERE id = 1").run();
    const r = await restore(snap, { force: true });
    expect(r.status, r.text).toBe(204);
    expect(await dump()).toEqual(before);

    for (const l of leaves) {
      const got = derOf((await read(`${ca.path}/cert/${l.serial}`)).body.data.certificate);
      expect(hex(got), l.serial).toBe(hex(l.der));
      expect(colonHex(AsnParser.parse(got, Certificate).tbsCertificate.serialNumber)).toBe(l.serial.replace(/^00:/, ""));
      const obj = await env.CERTS.get(`${mountId}/${l.serial}`);
      expect(obj?.httpMetadata?.contentType).toBe("application/pkix-cert");
    }
    const revokedSerial = leaves[1]?.serial ?? "";
    await write(`${ca.path}/revoke`, { serial_number: revokedSerial });
    await read(`${ca.path}/crl/rotate`);
    const crl = await api("GET", `${ca.path}/crl/pem`, { token: null });
    const revoked = AsnParser.parse(derOf(crl.text), CertificateList).tbsCertList.revokedCertificates ?? [];
    expect(revoked.map((e) => colonHex(e.userCertificate))).toContain(revokedSerial.replace(/^00:/, ""));
  });

  it("a changed body, a dropped page of bodies or a missing section is refused, and neither D1 nor the bucket changes", async () => {
    const { lines } = await saveLines();
    const before = { db: await dump(), certs: await bucket() };
    const at = lines.findIndex((l) => l.startsWith('{"items"'));
    const line = lines[at] ?? "";
    // One base64 character of the first body changed: still base64, another certificate.
    const pos = line.indexOf('","') + 10;
    const changed = [...lines];
    changed[at] = line.slice(0, pos) + (line[pos] === "A" ? "B" : "A") + line.slice(pos + 1);
    const dropped = lines.filter((_, i) => i !== at);
    const noSection = lines.filter((l) => !l.startsWith('{"objects"') && !l.startsWith('{"items"'));
    const cases: [string, string[], RegExp][] = [
      ["a changed body", changed, /corrupt \(its digest/],
      ["a dropped page of bodies", dropped, /corrupt/],
      ["no CERTS section", noSection, /corrupt/],
      ["cut inside the bodies", lines.slice(0, at + 1), /truncated/],
    ];
    // The bodies count towards MAX_SNAPSHOT_BYTES: a bound the snapshot without them would pass.
    const whole = `${lines.join("\n")}\n`;
    const without = `${noSection.join("\n")}\n`;
    const bound = await restore(whole, { vars: { MAX_SNAPSHOT_BYTES: String(utf8(without).length) } });
    expect(bound.status, bound.text).toBe(413);
    expect(bound.text).toMatch(/MAX_SNAPSHOT_BYTES/);
    for (const [what, ls, message] of cases) {
      const r = await restore(`${ls.join("\n")}\n`);
      expect(r.status, `${what}: ${r.text}`).toBe(400);
      expect(r.text, what).toMatch(message);
      expect(await dump(), what).toEqual(before.db);
      expect(await bucket(), what).toEqual(before.certs);
    }
  });

  it("a version-1 snapshot (no bodies) still restores, and leaves the bucket as it is", async () => {
    const { lines } = await saveLines();
    const before = { db: await dump(), certs: await bucket() };
    const header = { ...JSON.parse(lines[0] ?? ""), version: 1 };
    const body = [JSON.stringify(header), ...lines.slice(1, -1).filter((l) => !l.startsWith('{"objects"') && !l.startsWith('{"items"'))];
    const trailer = JSON.parse(lines.at(-1) ?? "") as Record<string, unknown>;
    delete trailer.objects;
    const v1 = [...body, JSON.stringify({ ...trailer, mac: await chainMac(body) })];
    // Changes the restore must undo.
    const serial = fx.leaves[2]?.serial ?? "";
    await write(`${fx.path}/revoke`, { serial_number: serial });
    const r = await restore(`${v1.join("\n")}\n`);
    expect(r.status, r.text).toBe(204);
    expect(await dump()).toEqual(before.db);
    expect(await bucket()).toEqual(before.certs);
    expect((await read(`${fx.path}/cert/${serial}`)).body.data.revocation_time).toBe(0);
    // The same with the objects count left in a version-1 trailer: corrupt (the counts disagree).
    const withCount = [...body, JSON.stringify({ ...trailer, objects: 3, mac: await chainMac(body) })];
    expect((await restore(`${withCount.join("\n")}\n`)).status).toBe(400);
  });

  it("a put that fails fails the restore before the swap: D1 as it was, staging dropped; restoring again completes", async () => {
    const { snap } = await saveLines();
    await emptyBucket();
    const extra = await write(`${fx.path}/issue/web`, { common_name: "late.example.com", ttl: "1h" });
    const before = await dump();
    let puts = 0;
    const flaky = {
      put: async (key: string, value: Uint8Array, opts?: R2PutOptions) => {
        if (++puts > 2) throw new Error("R2 is unavailable");
        return env.CERTS.put(key, value, opts);
      },
    } as unknown as R2Bucket;
    const failed = await restore(snap, { certs: flaky });
    expect(failed.status, failed.text).toBe(503);
    expect(failed.text).toMatch(/the database was not changed/);
    expect(await dump()).toEqual(before);
    const left = await env.DB.prepare(String.raw`SELECT count(*) AS n FROM sqlite_master WHERE name LIKE 'lanyard\_restore\_%' ESCAPE '\'`).first<{ n: number }>();
    expect(left?.n).toBe(0);
    const late = extra.body.data.serial_number as string;
    expect((await read(`${fx.path}/cert/${late}`)).body.data.certificate).toBe(extra.body.data.certificate);

    const r = await restore(snap);
    expect(r.status, r.text).toBe(204);
    for (const l of fx.leaves) expect(hex(derOf((await read(`${fx.path}/cert/${l.serial}`)).body.data.certificate))).toBe(hex(l.der));
    // The late certificate is not in the snapshot: its row is gone, its body left in the bucket (never read).
    await read(`${fx.path}/cert/${late}`, {}, 404);
    expect(await bodyHex(`${fx.mountId}/${late}`)).toBe(hex(derOf(extra.body.data.certificate)));
  });
});
