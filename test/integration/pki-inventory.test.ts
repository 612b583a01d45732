/**
 * The certificate inventory (docs/pki-inventory.md): LIST certs/detailed against @peculiar/x509's
 * reading of every issued certificate (an independent parser), each filter, sorting, paging
 * through 250 certificates with `after`/`limit` (every one exactly once), counts per state, the
 * expiry histogram, `no_store` certificates absent, bad parameters answered 400 naming the
 * parameter, a token of one mount unable to list another's, and the backfill of rows stored
 * before the inventory's columns existed.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { backfillInventory } from "../../src/engines/pki/inventory/backfill";
import { api, list, read, tokenWithPolicy, write } from "../helpers/api";
import { parseCert, pkiWithRoot, x509 } from "../helpers/pki";
import { storedBody } from "../helpers/cert-body";

interface Info {
  serial_number: string;
  common_name: string;
  alt_names: string[];
  issuer_id: string;
  role: string | null;
  not_before: string;
  not_after: string;
  revoked: boolean;
  revocation_time?: string;
  state: "valid" | "expired" | "revoked";
}

const detailed = async (path: string, q = "", opts = {}) => {
  const r = await list(`${path}/certs/detailed${q ? `?${q}` : ""}`, opts);
  return r.body.data as { keys: string[]; key_info: Record<string, Info>; excludes_no_store: boolean };
};

const rfc3339 = (d: Date) => d.toISOString().replace(".000Z", "Z");

/** The inventory facts of a PEM as @peculiar/x509 reads them. */
function facts(pem: string) {
  const c = parseCert(pem);
  const san = c.getExtension(x509.SubjectAlternativeNameExtension);
  const alt = (san?.names.items ?? []).filter((n) => ["dns", "email", "ip", "url"].includes(n.type));
  const order = ["dns", "email", "ip", "url"];
  return {
    common_name: c.subjectName.getField("CN").at(-1) ?? "",
    alt_names: order.flatMap((t) => alt.filter((n) => n.type === t).map((n) => n.value)),
    not_before: rfc3339(c.notBefore),
    not_after: rfc3339(c.notAfter),
  };
}

describe("certs/detailed against the certificates", () => {
  let path = "";
  let issuerId = "";
  const issued = new Map<string, string>();
  const revoked = new Set<string>();
  let expired = "";

  beforeAll(async () => {
    const ctx = await pkiWithRoot();
    path = ctx.path;
    issuerId = ctx.issuerId;
    await write(`${path}/roles/web`, { allow_any_name: true, allow_ip_sans: true, key_type: "ec", max_ttl: "9000h" });
    await write(`${path}/roles/mail`, { allow_any_name: true, key_type: "ec", max_ttl: "9000h", no_store: false });
    await write(`${path}/roles/ephemeral`, { allow_any_name: true, key_type: "ec", no_store: true });
    for (let i = 0; i < 24; i++) {
      const role = i % 3 === 0 ? "mail" : "web";
      const body: Record<string, unknown> = { common_name: `host${i}.Example.com`, ttl: `${(i + 1) * 24}h` };
      if (i % 2 === 0) body.alt_names = `alt${i}.example.net,www${i}.example.org`;
      if (i % 4 === 1) body.ip_sans = `10.0.0.${i}`;
      if (role === "mail") body.alt_names = `mail${i}@example.com`;
      const r = await write(`${path}/issue/${role}`, body);
      issued.set(r.body.data.serial_number, r.body.data.certificate);
    }
    for (const s of [...issued.keys()].filter((_, i) => i % 5 === 0)) {
      await write(`${path}/revoke`, { serial_number: s });
      revoked.add(s);
    }
    const e = await write(`${path}/issue/web`, { common_name: "soon-gone.example.com", ttl: "2s" });
    expired = e.body.data.serial_number;
    issued.set(expired, e.body.data.certificate);
    await write(`${path}/issue/ephemeral`, { common_name: "never-stored.example.com", ttl: "1h" });
    // Whole seconds: the 2 s certificate is past its not_after once a full second more has gone.
    await new Promise((r) => setTimeout(r, 3500));
  });

  it("lists every stored certificate with the facts the certificate holds", async () => {
    const d = await detailed(path, "limit=1000");
    expect(d.excludes_no_store).toBe(true);
    const leafs = d.keys.filter((k) => issued.has(k));
    expect(new Set(leafs)).toEqual(new Set(issued.keys()));
    // The root generated with the mount is stored too (as upstream stores it).
    expect(d.keys.length).toBe(issued.size + 1);
    for (const [serial, pem] of issued) {
      const info = d.key_info[serial];
      expect(info, serial).toBeDefined();
      expect({ common_name: info?.common_name, alt_names: info?.alt_names, not_before: info?.not_before, not_after: info?.not_after }).toEqual(facts(pem));
      expect(info?.issuer_id).toBe(issuerId);
      expect(info?.revoked).toBe(revoked.has(serial));
      expect(info?.state).toBe(revoked.has(serial) ? "revoked" : serial === expired ? "expired" : "valid");
      if (revoked.has(serial)) expect(Date.parse(info?.revocation_time ?? "")).toBeGreaterThan(Date.now() - 120_000);
      else expect(info?.revocation_time).toBeUndefined();
      expect(info?.role).toBe(info?.alt_names.some((n) => /^mail\d+@/.test(n)) ? "mail" : "web");
    }
    expect(Object.values(d.key_info).some((i) => i.common_name === "never-stored.example.com")).toBe(false);
    // Sorted by not_after ascending (the default), ties by serial.
    const ends = d.keys.map((k) => `${d.key_info[k]?.not_after}|${k}`);
    expect(ends).toEqual([...ends].sort());
  });

  it("filters by common name and SAN substring, case-insensitively, and by role, issuer and state", async () => {
    const cn = await detailed(path, "common_name=HOST1&limit=1000");
    expect(cn.keys.map((k) => cn.key_info[k]?.common_name).sort()).toEqual(
      ["host1", "host10", "host11", "host12", "host13", "host14", "host15", "host16", "host17", "host18", "host19"].map((h) => `${h}.Example.com`).sort(),
    );
    const san = await detailed(path, "san=EXAMPLE.NET");
    expect(san.keys.length).toBeGreaterThan(0);
    for (const k of san.keys) expect(san.key_info[k]?.alt_names.some((n) => n.includes("example.net"))).toBe(true);
    const ip = await detailed(path, "san=10.0.0.5");
    expect(ip.keys.map((k) => ip.key_info[k]?.common_name)).toEqual(["host5.Example.com"]);
    const mail = await detailed(path, "role=mail&limit=1000");
    expect(mail.keys.length).toBe(8);
    const byIssuer = await detailed(path, "issuer_ref=root-ca&limit=1000");
    expect(byIssuer.keys.length).toBe(issued.size + 1);
    expect((await detailed(path, `issuer_ref=${issuerId}&limit=1000`)).keys.length).toBe(issued.size + 1);
    const rev = await detailed(path, "state=revoked&limit=1000");
    expect(new Set(rev.keys)).toEqual(revoked);
    expect((await detailed(path, "state=expired")).keys).toEqual([expired]);
    const valid = await detailed(path, "state=valid&limit=1000");
    expect(valid.keys.length).toBe(issued.size + 1 - revoked.size - 1);
    // A literal % or _ matches itself, not any text.
    expect((await detailed(path, "common_name=%25")).keys).toEqual([]);
    expect((await detailed(path, "common_name=host_")).keys).toEqual([]);
  });

  it("filters by expiry window (RFC 3339 or Unix seconds) and sorts descending", async () => {
    const in3days = Math.floor(Date.now() / 1000) + 3 * 86400;
    const soon = await detailed(path, `expires_before=${in3days}&state=valid`);
    // host0 (24h) is revoked; host1 (48h) and host2 (72h, issued before in3days was taken) remain.
    expect(soon.keys.map((k) => soon.key_info[k]?.common_name)).toEqual(["host1.Example.com", "host2.Example.com"]);
    for (const k of soon.keys) expect(Date.parse(soon.key_info[k]?.not_after ?? "")).toBeLessThan(in3days * 1000);
    const iso = new Date(in3days * 1000).toISOString();
    const later = await detailed(path, `expires_after=${encodeURIComponent(iso)}&limit=1000`);
    for (const k of later.keys) expect(Date.parse(later.key_info[k]?.not_after ?? "")).toBeGreaterThan(in3days * 1000);
    expect(later.keys.length + (await detailed(path, `expires_before=${in3days + 1}&limit=1000`)).keys.length).toBe(issued.size + 1);
    const desc = await detailed(path, "order=desc&limit=1000");
    const ends = desc.keys.map((k) => `${desc.key_info[k]?.not_after}|${k}`);
    expect(ends).toEqual([...ends].sort().reverse());
    const bySerial = await detailed(path, "sort=serial&limit=1000");
    expect(bySerial.keys).toEqual([...bySerial.keys].sort());
  });

  it("counts per state and the expiry histogram agree with the certificates", async () => {
    const c = (await read(`${path}/certs/counts`)).body.data;
    expect(c).toEqual({ total: issued.size + 1, valid: issued.size - revoked.size - 1 + 1, expired: 1, revoked: revoked.size, excludes_no_store: true });
    const mailCounts = (await read(`${path}/certs/counts?role=mail`)).body.data;
    expect(mailCounts.total).toBe(8);
    const h = (await read(`${path}/certs/expiry-histogram?days=30`)).body.data;
    expect(h.days).toBe(30);
    expect(h.histogram).toHaveLength(30);
    expect(h.excludes_no_store).toBe(true);
    const expect30 = new Map<string, number>();
    const horizon = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth(), new Date().getUTCDate()) + 30 * 86400_000;
    for (const [serial, pem] of issued) {
      const end = parseCert(pem).notAfter;
      if (revoked.has(serial) || end.getTime() <= Date.now() || end.getTime() >= horizon) continue;
      const day = end.toISOString().slice(0, 10);
      expect30.set(day, (expect30.get(day) ?? 0) + 1);
    }
    for (const { date, count } of h.histogram as { date: string; count: number }[]) expect(count, date).toBe(expect30.get(date) ?? 0);
    expect((h.histogram as { count: number }[]).reduce((a, b) => a + b.count, 0)).toBe([...expect30.values()].reduce((a, b) => a + b, 0));
  });

  it("answers 400 naming the parameter for bad values", async () => {
    const cases: [string, string][] = [
      ["state=gone", "state"],
      ["sort=cn", "sort"],
      ["order=up", "order"],
      ["limit=0", "limit"],
      ["limit=1001", "limit"],
      ["limit=ten", "limit"],
      ["expires_before=tomorrow", "expires_before"],
      ["expires_after=2026-13-99", "expires_after"],
      ["issuer_ref=nobody", "issuer_ref"],
      ["after=zz-not-hex", "after"],
      ["after=01:02:03", "after"],
    ];
    for (const [q, field] of cases) {
      const r = await api("GET", `${path}/certs/detailed?list=true&${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.errors.join(" "), q).toMatch(new RegExp(`^${field}:`));
    }
    for (const days of ["0", "367", "x"]) {
      const r = await api("GET", `${path}/certs/expiry-histogram?days=${days}`);
      expect(r.status).toBe(400);
      expect(r.body.errors[0]).toMatch(/^days:/);
    }
    const r = await api("GET", `${path}/certs/counts?state=nope`);
    expect(r.status).toBe(400);
  });

  it("takes the parameters from a POST body as well", async () => {
    const r = await write(`${path}/certs/detailed`, { role: "mail", limit: 3 });
    expect(r.body.data.keys).toHaveLength(3);
  });
});

describe("paging", () => {
  it("walks 250 certificates with after/limit, each exactly once, in both sort orders", async () => {
    const ctx = await pkiWithRoot();
    await write(`${ctx.path}/roles/r`, { allow_any_name: true, key_type: "ec", max_ttl: "9000h" });
    const all = new Set<string>();
    // Groups of equal not_after (same ttl, same second) exercise the serial tie-break.
    for (let i = 0; i < 249; i++) all.add((await write(`${ctx.path}/issue/r`, { common_name: `p${i}.example.com`, ttl: `${1 + (i % 7)}h` })).body.data.serial_number);
    const total = all.size + 1;
    for (const q of ["limit=17", "limit=17&order=desc", "limit=23&sort=serial", "limit=23&sort=serial&order=desc"]) {
      const seen: string[] = [];
      let after = "";
      for (let pages = 0; pages < 100; pages++) {
        const d = await detailed(ctx.path, `${q}${after ? `&after=${after}` : ""}`);
        if (d.keys.length === 0) break;
        expect(d.keys.length).toBeLessThanOrEqual(q.includes("17") ? 17 : 23);
        seen.push(...d.keys);
        after = d.keys.at(-1) ?? "";
      }
      expect(seen.length, q).toBe(total);
      expect(new Set(seen).size, q).toBe(total);
    }
    // The default page is 100.
    expect((await detailed(ctx.path)).keys).toHaveLength(100);
  });
});

describe("who may list", () => {
  it("a token that can list one mount's inventory cannot list another's", async () => {
    const a = await pkiWithRoot();
    const b = await pkiWithRoot();
    const token = await tokenWithPolicy(`path "${a.path}/certs/*" { capabilities = ["read", "list"] }`);
    expect((await detailed(a.path, "", { token })).keys.length).toBe(1);
    expect((await api("GET", `${b.path}/certs/detailed?list=true`, { token })).status).toBe(403);
    expect((await api("GET", `${b.path}/certs/counts`, { token })).status).toBe(403);
    expect((await api("GET", `${b.path}/certs/expiry-histogram`, { token })).status).toBe(403);
  });
});

describe("rows stored before the inventory columns", () => {
  it("are listed from their DER at once and filled by the backfill job", async () => {
    const ctx = await pkiWithRoot();
    await write(`${ctx.path}/roles/r`, { allow_any_name: true, key_type: "ec", allow_ip_sans: true });
    const r = await write(`${ctx.path}/issue/r`, { common_name: "old.example.com", alt_names: "older.example.com", ip_sans: "192.0.2.7", ttl: "1h" });
    const serial = r.body.data.serial_number as string;
    // A row from before the inventory columns is also one from before bodies moved to R2: its DER is in the row.
    const { der } = await storedBody(serial);
    await env.DB.prepare("UPDATE pki_certs SET common_name = NULL, sans = NULL, not_before = NULL, der = ? WHERE serial = unhex(replace(?, ':', ''))").bind(der, serial).run();
    const before = await detailed(ctx.path, "limit=10");
    expect(before.key_info[serial]).toMatchObject(facts(r.body.data.certificate));
    expect((await detailed(ctx.path, "common_name=old.example")).keys).toEqual([]);
    let n = 0;
    do n = await backfillInventory(env, 500);
    while (n > 0);
    const after = await detailed(ctx.path, "common_name=old.example");
    expect(after.keys).toEqual([serial]);
    expect(after.key_info[serial]?.alt_names).toEqual(["old.example.com", "older.example.com", "192.0.2.7"]);
  });
});
