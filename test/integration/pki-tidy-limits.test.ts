/**
 * Tidy within one invocation's limits (docs/pki-tidy.md "How it runs"): a step is one Authority
 * alarm, one Worker invocation, which may make at most 1,000 D1 queries. Whatever page_size asks,
 * a step handles at most MAX_STEP entries with a bounded number of statements (counted on the
 * D1 binding, a statement inside a batch counted as one), and re-associating a page of
 * revocation entries costs a statement per issuer and chunk, not one per entry.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { openDb } from "../../src/core/db/client";
import { getMountsByIds } from "../../src/core/mount-store";
import { MAX_STEP, newJob, tidyParamsFromFields } from "../../src/engines/pki/tidy/tidy";
import { tidyStep } from "../../src/engines/pki/tidy/tidy-job";
import { setRevokedIssuers } from "../../src/engines/pki/storage/tidy-store";
import { read } from "../helpers/api";
import { pkiWithRoot } from "../helpers/pki";
import { counted } from "../helpers/counted-db";

/** `n` rows of a table for the mount, written in one statement (serials "ee:<i>"; as pki_certs keeps octets, its rows' colon hex is "ee:" and three octets), with the given not_after. */
async function fill(table: "pki_certs" | "pki_revoked", mountId: string, issuerId: string, n: number, notAfter: number): Promise<void> {
  const rows = `WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?3)`;
  const sql =
    table === "pki_certs"
      ? `${rows} INSERT INTO pki_certs (mount_no, serial, der, issuer_no, not_after, created_at) SELECT (SELECT no FROM pki_ids WHERE id = ?1), unhex(printf('ee%06x', i)), 'AA==', (SELECT no FROM pki_ids WHERE id = ?2), ?4, 0 FROM k`
      : `${rows} INSERT INTO pki_revoked (mount_id, serial, issuer_id, revocation_time, not_after, der, created_at) SELECT ?1, printf('ee:%06x', i), ?2, 1, ?4, 'AA==', 0 FROM k`;
  await env.DB.prepare(sql).bind(mountId, issuerId, n, notAfter).run();
}

async function mountOf(path: string) {
  const id = (await read("sys/mounts")).body.data[`${path}/`].uuid as string;
  const [mount] = await getMountsByIds(openDb(env.DB), [id]);
  if (!mount) throw new Error("mount row missing");
  return mount;
}

describe("tidy steps at scale", () => {
  it("a page_size far above MAX_STEP still handles MAX_STEP entries per step, in a few dozen statements", async () => {
    const { path, issuerId } = await pkiWithRoot();
    const mount = await mountOf(path);
    const total = MAX_STEP + 500;
    await fill("pki_certs", mount.id, issuerId, total, Math.floor(Date.now() / 1000) - 30 * 86400);
    const c = counted();
    const params = tidyParamsFromFields({ tidy_cert_store: true, page_size: 1_000_000 }, () => false);
    let job = newJob(params, Date.now(), false);
    const perStep: number[] = [];
    const checked: number[] = [];
    while (job.state === "Running") {
      const before = c.count();
      job = await tidyStep({ ...env, DB: c.db }, mount, job, Date.now());
      perStep.push(c.count() - before);
      checked.push(job.counters.checked);
    }
    expect(job.counters.certStoreDeleted).toBe(total);
    expect(checked[0]).toBe(MAX_STEP);
    // 1 page read + ceil(1000 / 90) deletes of certificates (+ as many of revocations at most).
    expect(Math.max(...perStep)).toBeLessThanOrEqual(30);
  });

  it("re-associating 1,000 revocation entries is one UPDATE per issuer and 90 serials", async () => {
    const { path, issuerId } = await pkiWithRoot();
    const mount = await mountOf(path);
    await fill("pki_revoked", mount.id, "gone-issuer", 1000, Math.floor(Date.now() / 1000) + 86400);
    const updates = Array.from({ length: 1000 }, (_, i) => ({ serial: `ee:${i.toString(16).padStart(6, "0")}`, issuerId: i % 2 === 0 ? issuerId : "" }));
    const c = counted();
    await setRevokedIssuers(openDb(c.db), mount.id, updates);
    expect(c.count()).toBe(2 * Math.ceil(500 / 90));
    const rows = (await env.DB.prepare("SELECT issuer_id, count(*) AS n FROM pki_revoked WHERE mount_id = ? GROUP BY issuer_id ORDER BY issuer_id").bind(mount.id).all<{ issuer_id: string; n: number }>()).results;
    expect(rows).toEqual([
      { issuer_id: "", n: 500 },
      { issuer_id: issuerId, n: 500 },
    ]);
  });
});
