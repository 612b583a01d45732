/**
 * The bounded scan of substring-filtered inventory pages (docs/pki-inventory.md "Substring
 * search"): on a mount holding more than two scan windows of certificates, a rare match beyond
 * the first window is found by following `next_after`; walking the cursors returns every match
 * exactly once, in order, in both directions and both sorts (short pages with a cursor included);
 * a bad cursor is a 400 naming `after`; pages without a substring filter keep OpenBao's shape;
 * counts under a substring filter count every match (they are not windowed).
 *
 * The bulk of the mount is written with one SQL statement (as scripts/bench-inventory.mjs does):
 * issuing 45,000 certificates through the API would take minutes. The rare matches are real
 * certificates issued through the API, read back with @peculiar/x509.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { SCAN_WINDOW } from "../../src/engines/pki/storage/inventory-store";
import { api, list, read, write } from "../helpers/api";
import { parseCert, pkiWithRoot, x509 } from "../helpers/pki";

interface Page {
  keys: string[];
  key_info: Record<string, { common_name: string; alt_names: string[]; not_after: string }>;
  next_after?: string;
  scan_incomplete?: boolean;
}

const BULK = 2 * SCAN_WINDOW.not_after + 5000;
/** Bulk row i's common name contains "multi" when i % MULTI_EVERY === 0. */
const MULTI_EVERY = 1499;
const DAY = 86400;

let path = "";
let needle = "";
let needlePem = "";
const multi = new Set<number>();

async function page(q: string): Promise<Page> {
  const r = await list(`${path}/certs/detailed?${q}`);
  expect(r.status, q).toBe(200);
  return r.body.data as Page;
}

/** Follows next_after from the first page; returns every key, the pages and how many were short with a cursor. */
async function walk(q: string, limit: number) {
  const keys: string[] = [];
  const infos: Page["key_info"] = {};
  let after = "";
  let pages = 0;
  let shortWithCursor = 0;
  for (;;) {
    const d = await page(`${q}&limit=${limit}${after ? `&after=${after}` : ""}`);
    pages += 1;
    keys.push(...d.keys);
    Object.assign(infos, d.key_info);
    expect(d.keys.length).toBeLessThanOrEqual(limit);
    if (d.next_after === undefined) {
      expect(d.scan_incomplete).toBe(false);
      break;
    }
    if (d.keys.length < limit) {
      shortWithCursor += 1;
      expect(d.scan_incomplete).toBe(true);
    }
    after = d.next_after;
    expect(pages).toBeLessThan(200);
  }
  return { keys, infos, pages, shortWithCursor };
}

beforeAll(async () => {
  const ctx = await pkiWithRoot();
  path = ctx.path;
  const mounts = await read("sys/mounts");
  const mountId = (mounts.body.data as Record<string, { uuid: string }>)[`${path}/`]?.uuid ?? "";
  const now = Math.floor(Date.now() / 1000);
  // Bulk rows expire within the next 30 days, so the real certificates (ttl 60 days) come last
  // in not_after order, beyond the first window. Serials are distinct (a bijection of i).
  await env.DB.prepare(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
     INSERT INTO pki_certs (mount_no, serial, der, issuer_no, not_after, created_at, metadata, common_name, sans, not_before, role, revoked_at)
     SELECT (SELECT no FROM pki_ids WHERE id = ?), unhex(printf('%02x%02x%02x%02x%02x', (i * 2654435761) % 4294967296 / 16777216, (i * 2654435761) % 16777216 / 65536,
                      (i * 2654435761) % 65536 / 256, (i * 2654435761) % 256, i % 256)),
            'AA==', (SELECT no FROM pki_ids WHERE id = ?), ? + (i * 7919) % ?, ?, NULL,
            CASE WHEN i % ? = 0 THEN 'multi' || i || '.example.com' ELSE 'bulk' || i || '.example.com' END,
            'bulk' || i || '.example.net', ? - ?, 'bulk', NULL
     FROM n`,
  )
    .bind(BULK, mountId, ctx.issuerId, now + DAY, 29 * DAY, now * 1000, MULTI_EVERY, now, DAY)
    .run();
  for (let i = MULTI_EVERY; i <= BULK; i += MULTI_EVERY) multi.add(i);
  await write(`${path}/roles/web`, { allow_any_name: true, key_type: "ec", max_ttl: "9000h" });
  const r = await write(`${path}/issue/web`, { common_name: "needle-7.example.com", alt_names: "haystack-only.example.org", ttl: "1440h" });
  needle = r.body.data.serial_number as string;
  needlePem = r.body.data.certificate as string;
}, 120_000);

// The bulk rows' serials as the INSERT above writes them, for the "multi" ones.
function bulkSerial(i: number): string {
  const h = (i * 2654435761) % 4294967296;
  const b = [Math.floor(h / 16777216), Math.floor((h % 16777216) / 65536), Math.floor((h % 65536) / 256), h % 256, i % 256];
  return b.map((x) => x.toString(16).padStart(2, "0")).join(":");
}

describe("substring pages read a bounded window", () => {
  it("a rare match beyond the first window is found by following next_after", async () => {
    const first = await page("common_name=needle-7");
    expect(first.keys).toEqual([]);
    expect(first.scan_incomplete).toBe(true);
    expect(typeof first.next_after).toBe("string");
    const cert = parseCert(needlePem);
    for (const q of ["common_name=NEEDLE-7.", "san=haystack-only"]) {
      const w = await walk(q, 100);
      expect(w.keys, q).toEqual([needle]);
      // More than two windows of rows precede it: at least three pages to reach it.
      expect(w.pages, q).toBeGreaterThanOrEqual(3);
      const info = w.infos[needle];
      expect(info?.common_name, q).toBe(cert.subjectName.getField("CN")[0]);
      expect(info?.alt_names, q).toEqual(cert.getExtension(x509.SubjectAlternativeNameExtension)?.names.items.map((n) => n.value));
    }
  });

  it("every match is returned exactly once across cursor pages, in order, both ways and both sorts", async () => {
    const expected = new Set([...multi].map(bulkSerial));
    expect(expected.size).toBe(multi.size);
    for (const q of ["common_name=multi", "common_name=multi&order=desc", "common_name=multi&sort=serial", "common_name=multi&sort=serial&order=desc"]) {
      for (const limit of [7, 20]) {
        const w = await walk(q, limit);
        expect(w.keys.length, q).toBe(expected.size);
        expect(new Set(w.keys), q).toEqual(expected);
        // One row in 1,499 matches, fewer than 20 a window: with 20 a page, windows end short of it.
        if (limit === 20) expect(w.shortWithCursor, q).toBeGreaterThan(0);
        if (q.includes("sort=serial")) {
          const sorted = [...w.keys].sort();
          expect(w.keys, q).toEqual(q.includes("desc") ? sorted.reverse() : sorted);
        }
      }
    }
    // A full page continues after its last key, as every keyset page does.
    const full = await page("common_name=multi&limit=2");
    expect(full.keys).toHaveLength(2);
    expect(full.next_after).toBe(full.keys[1]);
    expect(full.scan_incomplete).toBe(false);
  });

  it("combines with the other filters", async () => {
    const now = Math.floor(Date.now() / 1000);
    const expected = new Set([...multi].map(bulkSerial));
    for (const q of [
      "common_name=multi&role=bulk&state=valid",
      `common_name=multi&issuer_ref=root-ca&role=bulk&expires_after=${now}`,
      "common_name=multi&issuer_ref=root-ca&state=valid",
      "common_name=multi&state=valid&sort=serial&order=desc",
    ]) {
      const w = await walk(q, 20);
      expect(new Set(w.keys), q).toEqual(expected);
      expect(w.keys.length, q).toBe(expected.size);
    }
    expect((await walk("common_name=multi&role=web", 50)).keys).toEqual([]);
    expect((await walk("common_name=multi&role=bulk&state=revoked", 50)).keys).toEqual([]);
  });

  it("a bad cursor is a 400 naming after", async () => {
    for (const after of ["not-a-serial!", "de:ad:be:ef:00:00:00"]) {
      const r = await api("GET", `${path}/certs/detailed?list=true&common_name=multi&after=${encodeURIComponent(after)}`);
      expect(r.status, after).toBe(400);
      expect(JSON.stringify(r.body.errors), after).toMatch(/^\["after: /);
    }
  });

  it("pages without a substring filter keep OpenBao's shape; counts are not windowed", async () => {
    const d = await page("limit=3");
    expect(Object.keys(d).sort()).toEqual(["excludes_no_store", "key_info", "keys"]);
    const c = await read(`${path}/certs/counts?common_name=multi`);
    expect(c.body.data).toMatchObject({ total: multi.size, valid: multi.size, expired: 0, revoked: 0 });
    const all = await read(`${path}/certs/counts`);
    // The bulk rows, the needle and the root CA's own certificate.
    expect(all.body.data.total).toBe(BULK + 2);
    const h = await read(`${path}/certs/expiry-histogram?days=90`);
    const total = (h.body.data.histogram as { count: number }[]).reduce((a, b) => a + b.count, 0);
    expect(total).toBe(BULK + 1);
  });
});
