/**
 * The certificate inventory (docs/pki-inventory.md) judged by openssl: three dozen certificates
 * with varied common names, SANs and lifetimes, some revoked; each one's `key_info` (common
 * name, SANs, not_after, state) must say what `openssl x509 -noout -subject -ext subjectAltName
 * -enddate` reads from its PEM, and the expiry histogram must count, per UTC day, what openssl's
 * end dates give.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { openssl, withFiles } from "../helpers/openssl";
import { CA_NOT_AFTER, ok, pkiMount } from "./client";

interface Seen {
  cn: string;
  sans: string[];
  notAfter: number;
}

/** openssl's reading of one certificate. */
async function opensslView(pem: string): Promise<Seen> {
  const out = await withFiles({ "c.pem": pem }, async (p) => {
    const r = await openssl(["x509", "-in", p("c.pem"), "-noout", "-subject", "-ext", "subjectAltName", "-enddate", "-nameopt", "RFC2253"]);
    if (r.code !== 0) throw new Error(r.stderr);
    return r.stdout;
  });
  const cn = /^subject=(?:.*,)?CN=([^,\n]*)/m.exec(out)?.[1] ?? "";
  const sanLine = /X509v3 Subject Alternative Name:[^\n]*\n\s*([^\n]*)/.exec(out)?.[1] ?? "";
  // openssl prints "DNS:a, IP Address:10.0.0.1, email:x@y": the values, in the inventory's form.
  const sans = sanLine === "" ? [] : sanLine.split(", ").map((s) => s.replace(/^(DNS|IP Address|email|URI):/, ""));
  const end = /^notAfter=(.*)$/m.exec(out)?.[1] ?? "";
  return { cn, sans, notAfter: Date.parse(end) };
}

describe("inventory against openssl", () => {
  let path = "";
  const pems = new Map<string, string>();
  const revoked = new Set<string>();

  beforeAll(async () => {
    path = await pkiMount();
    await ok("POST", `${path}/root/generate/internal`, { common_name: "Inventory Root", key_type: "ec", not_after: CA_NOT_AFTER });
    await ok("POST", `${path}/roles/r`, { allow_any_name: true, key_type: "ec", max_ttl: "760h" });
    for (let i = 0; i < 36; i++) {
      const body: Record<string, unknown> = { common_name: `svc${i}.inv.example`, ttl: `${24 + i * 20}h` };
      if (i % 3 === 0) body.alt_names = `a${i}.inv.example,b${i}.other.example`;
      if (i % 4 === 0) body.ip_sans = `192.0.2.${i}`;
      if (i % 5 === 0) body.exclude_cn_from_sans = true;
      const r = await ok("POST", `${path}/issue/r`, body);
      pems.set(r.body.data.serial_number, r.body.data.certificate);
    }
    for (const s of [...pems.keys()].filter((_, i) => i % 7 === 3)) {
      await ok("POST", `${path}/revoke`, { serial_number: s });
      revoked.add(s);
    }
  }, 120_000);

  it("key_info says what openssl reads", async () => {
    const r = await ok("GET", `${path}/certs/detailed?list=true&limit=1000`);
    const info = r.body.data.key_info as Record<string, { common_name: string; alt_names: string[]; not_after: string; state: string }>;
    for (const [serial, pem] of pems) {
      const seen = await opensslView(pem);
      const k = info[serial];
      expect(k, serial).toBeDefined();
      expect(k?.common_name).toBe(seen.cn);
      expect([...(k?.alt_names ?? [])].sort()).toEqual([...seen.sans].sort());
      expect(Date.parse(k?.not_after ?? "")).toBe(seen.notAfter);
      expect(k?.state).toBe(revoked.has(serial) ? "revoked" : "valid");
    }
    // A SAN search finds exactly the certificates whose openssl SANs contain it.
    const s = await ok("GET", `${path}/certs/detailed?list=true&san=other.example&limit=1000`);
    const want: string[] = [];
    for (const [serial, pem] of pems) if ((await opensslView(pem)).sans.some((n) => n.includes("other.example"))) want.push(serial);
    expect([...(s.body.data.keys as string[])].sort()).toEqual(want.sort());
  });

  it("the expiry histogram counts openssl's end dates per day", async () => {
    const h = await ok("GET", `${path}/certs/expiry-histogram?days=90`);
    const counts = new Map<string, number>();
    const first = Date.parse(`${h.body.data.histogram[0].date}T00:00:00Z`);
    for (const [serial, pem] of pems) {
      const end = (await opensslView(pem)).notAfter;
      if (revoked.has(serial) || end < Date.now() || end >= first + 90 * 86400_000) continue;
      const day = new Date(end).toISOString().slice(0, 10);
      counts.set(day, (counts.get(day) ?? 0) + 1);
    }
    expect(counts.size).toBeGreaterThan(5);
    for (const { date, count } of h.body.data.histogram as { date: string; count: number }[]) expect(count, date).toBe(counts.get(date) ?? 0);
  });
});
