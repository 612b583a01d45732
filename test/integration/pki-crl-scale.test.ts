/**
 * CRL builds stay linear in the revocations (docs/pki-revocation-crl.md "Performance"): each page
 * of revocations the build reads is one range of the index pki_revoked_mount_shard (SQLite's own
 * EXPLAIN QUERY PLAN: no temporary sort, the id bound inside the index search), the build reads
 * them in bounded pages (D1 statements counted), and a CRL too large for one D1 value is stored in
 * slices and read back whole: every seeded revocation on the full CRL and on its shard, checked
 * with @peculiar/asn1-x509 (an independent parser).
 */
import { env } from "cloudflare:test";
import { AsnParser } from "@peculiar/asn1-schema";
import { CertificateList } from "@peculiar/asn1-x509";
import { describe, expect, it } from "vitest";
import { openDb } from "../../src/core/db/client";
import { getMountsByIds } from "../../src/core/mount-store";
import { buildMountCrls } from "../../src/engines/pki/revocation/crl-rebuild";
import { listRevokedEntriesOfShard, listRevokedEntriesSince, nextRevokedShardQuery } from "../../src/engines/pki/storage/revocation-store";
import { api, read, write } from "../helpers/api";
import { pkiWithRoot, x509 } from "../helpers/pki";
import { counted } from "../helpers/counted-db";

/** asn1js stops at 10,000 nodes by default; a 40,000-entry CRL has ≈ 120,000. */
const BIG = { berOptions: { maxNodes: 1_000_000 } };

/** A CRL path's DER, through its PEM form (the test helper reads bodies as text). */
async function crlDer(path: string): Promise<Uint8Array> {
  const r = await api("GET", `${path}/pem`, { token: null });
  expect(r.status, r.text).toBe(200);
  return new Uint8Array(x509.PemConverter.decodeFirst(r.text));
}

async function plan(q: { toSQL(): { sql: string; params: unknown[] } }): Promise<string[]> {
  const { sql, params } = q.toSQL();
  const r = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .bind(...params)
    .all<{ detail: string }>();
  return r.results.map((x) => x.detail);
}

describe("CRL builds at scale", () => {
  it("read each page of revocations as one index range, without sorting the mount's revocations", async () => {
    const db = openDb(env.DB);
    for (const shard of [null, 3]) {
      const steps = await plan(listRevokedEntriesOfShard(db, "m", shard, 10, 1_000_000, 5000));
      expect(steps.join("\n")).not.toContain("TEMP B-TREE");
      expect(steps.some((s) => s.includes("pki_revoked_mount_shard") && s.includes("id>?"))).toBe(true);
    }
    // A delta's read: the primary key over the range since its base.
    const since = await plan(listRevokedEntriesSince(db, "m", 10, 1_000_000, 5000));
    expect(since.join("\n")).not.toContain("TEMP B-TREE");
    expect(since.some((s) => s.includes("INTEGER PRIMARY KEY (rowid>? AND rowid<?)"))).toBe(true);
    const next = await plan(nextRevokedShardQuery(db, "m", 2));
    expect(next.some((s) => s.includes("COVERING INDEX pki_revoked_mount_shard"))).toBe(true);
  });

  it("build a CRL of 40,000 revocations in bounded pages, stored in slices, every entry on it", async () => {
    const { path, issuerId } = await pkiWithRoot();
    await write(`${path}/config/urls`, { crl_distribution_points: ["http://crl.example/v1/pki/crl"] });
    expect((await write(`${path}/config/crl`, { shard_count: 4, max_crl_entries: -1 })).status).toBe(200);
    const mountId = (await read("sys/mounts")).body.data[`${path}/`].uuid as string;
    const n = 40_000;
    // Every fifth on no shard (issued before sharding), the others on shards 0-3.
    await env.DB.prepare(
      `WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?3)
       INSERT INTO pki_revoked (mount_id, serial, issuer_id, revocation_time, not_after, der, created_at, crl_shard)
       SELECT ?1, printf('7e:%06x', i), ?2, 1900000000 + i, 2000000000, 'AA==', 0, CASE WHEN i % 5 = 4 THEN NULL ELSE i % 5 END FROM k`,
    )
      .bind(mountId, issuerId, n)
      .run();
    const [mount] = await getMountsByIds(openDb(env.DB), [mountId]);
    if (!mount) throw new Error("mount row missing");
    const { db, count } = counted();
    const numbers = new Map<string, number>();
    const counters = { last: async (k: string) => numbers.get(k) ?? 0, store: async (k: string, v: number) => void numbers.set(k, v) };
    const report = await buildMountCrls({ ...env, DB: db }, mount, { kind: "complete", force: true }, counters);
    expect(report.errors).toEqual([]);
    // 5 segments of ≤ 2 pages of 5,000, 5 next-segment seeks, setup reads and the writes: nowhere near one per entry.
    expect(count()).toBeLessThan(60);

    const der = await crlDer(`${path}/crl`);
    // More than one stored slice of 1,000,000 base64 characters (750,000 bytes).
    expect(der.length).toBeGreaterThan(750_000);
    const list = AsnParser.parse(der, CertificateList, BIG);
    const serials = list.tbsCertList.revokedCertificates?.map((e) => Buffer.from(e.userCertificate).toString("hex")) ?? [];
    expect(serials.length).toBe(n);
    expect(new Set(serials).size).toBe(n);
    const shard2 = AsnParser.parse(await crlDer(`${path}/crl/shard/2`), CertificateList, BIG);
    expect(shard2.tbsCertList.revokedCertificates?.length).toBe(n / 5);
  });
});
