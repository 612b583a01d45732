// The scale bench's Worker (npm run bench -- scale → scripts/bench-scale.mjs): the production
// Worker (src/app/index.ts, with wrangler.toml's bindings) plus bench-only routes under
// /__bench/: `POST seed` writes synthetic pki_certs / pki_revoked rows straight into D1 with a
// single INSERT … SELECT over a recursive CTE per call, `counts` counts a mount's rows, and
// `alarm-stats` reports the D1 statements of each Authority alarm (a tidy step). They exist only in this bundle
// (scripts/lib/bench-common.mjs startBenchWorker({entry})), never in the deployed Worker, and
// it takes no token: the bench Worker listens on loopback only.
//
// The rows follow docs/storage-schema.md (pki_certs with the inventory columns of 0017, in the slim layout of 0019;
// pki_revoked with its AUTOINCREMENT sequence, whose insert trigger marks pki_certs.revoked_at).
// Everything that writes a row is in `seedSql`, so a change of where certificate bodies live
// (e.g. DER outside D1) is one function to adapt.
import worker, { Authority as ProductionAuthority, SyncGate } from "../src/app/index";

export { SyncGate };

/**
 * D1 statements made by each Authority alarm (a tidy step is one alarm, one invocation): the
 * Workers limit is 1,000 D1 queries per invocation (https://developers.cloudflare.com/d1/platform/limits/),
 * and a statement inside a batch is counted as one here (the cautious reading). Module state: in
 * the local runtime the Durable Object runs in the Worker's isolate, so the fetch route below
 * reads it.
 */
const alarmStats = { alarms: 0, maxStatements: 0, statements: 0, inAlarm: false, current: 0 };

/** env.DB with every prepared statement counted while an alarm runs (drizzle prepares each statement once, batched or not). */
function countingDb(db: D1Database): D1Database {
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") {
        return (sql: string) => {
          if (alarmStats.inAlarm) alarmStats.current++;
          return target.prepare(sql);
        };
      }
      const v: unknown = Reflect.get(target, prop);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

/** The production Authority, its D1 counted per alarm. */
export class Authority extends ProductionAuthority {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, { ...env, DB: countingDb(env.DB) });
  }

  override async alarm(): Promise<void> {
    alarmStats.inAlarm = true;
    alarmStats.current = 0;
    try {
      await super.alarm();
    } finally {
      alarmStats.inAlarm = false;
      alarmStats.alarms++;
      alarmStats.statements += alarmStats.current;
      alarmStats.maxStatements = Math.max(alarmStats.maxStatements, alarmStats.current);
    }
  }
}

interface SeedRequest {
  /** "valid": not_after ahead; "expired": 30 days past (tidy's prey); "revoked": pki_revoked rows of the valid ones. */
  kind: "valid" | "expired" | "revoked";
  mountId: string;
  issuerId: string;
  /** Row numbers [from, to): the serial of row i is a function of (kind, i), so calls are idempotent per range. */
  from: number;
  to: number;
  /** Base64 DER written in every row (one real certificate of the mount: realistic row size). */
  der: string;
  /** Unix seconds. */
  now: number;
}

/**
 * The serial of synthetic row i as SQL: 10 colon-separated hex octets, i in the first four (so
 * rows are appended to the serial index in order, which keeps seeding fast: a random position
 * per row costs SQLite a page-cache miss at 1M rows), then a kind marker, then a fixed tail.
 * Real serials are 20 octets, so they never collide with these.
 */
function serialSql(marker: string): string {
  return `printf('%02x:%02x:%02x:%02x:${marker}:5c:a1:e0:00', (i >> 24) & 127, (i >> 16) & 255, (i >> 8) & 255, i & 255)`;
}

/** The one statement (and its bound values) that writes rows [from, to) of a kind. */
function seedSql(r: SeedRequest): { sql: string; values: unknown[] } {
  const day = 86400;
  const range = `WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?2)`;
  if (r.kind === "revoked") {
    return {
      // crl_shard: as if issued under config/crl shard_count 4 (a real certificate gets serial mod 4;
      // these serials all end in 00, so the row number spreads them); unused until shards are published.
      sql: `${range} INSERT INTO pki_revoked (mount_id, serial, issuer_id, revocation_time, not_after, der, created_at, reason, crl_shard)
            SELECT ?3, ${serialSql("00:00")}, ?4, ?5 - (i % ${day}), ?5 + ${30 * day} + i * 25, ?6, ?5 * 1000, 0, i % 4 FROM n`,
      values: [r.from, r.to, r.mountId, r.issuerId, r.now, r.der],
    };
  }
  const expired = r.kind === "expired";
  // Growing with i, like the serial (every index is appended to in order): valid rows expire from
  // 30 days ahead on, 25 s apart (1M rows span 290 days); expired ones 60 days ago on, 1 s apart
  // (1M rows span 12 days: all past tidy's 72 h buffer).
  const notAfter = expired ? `?5 - ${60 * day} + i` : `?5 + ${30 * day} + i * 25`;
  return {
    // pki_certs keeps pki_ids numbers and the serial's octets (migration 0019; seed() numbers the ids).
    sql: `${range} INSERT INTO pki_certs (mount_no, serial, der, issuer_no, not_after, created_at, metadata, common_name, sans, not_before, role)
          SELECT (SELECT no FROM pki_ids WHERE id = ?3), unhex(replace(${serialSql(expired ? "00:01" : "00:00")}, ':', '')), ?6, (SELECT no FROM pki_ids WHERE id = ?4), ${notAfter}, ?5 * 1000, NULL,
                 'host' || i || '.scale.example', 'host' || i || '.scale.example', ${notAfter} - ${90 * day}, 'ec' FROM n`,
    values: [r.from, r.to, r.mountId, r.issuerId, r.now, r.der],
  };
}

async function seed(request: Request, env: Env): Promise<Response> {
  const r = (await request.json()) as SeedRequest;
  if (!(r.to > r.from)) return Response.json({ written: 0 });
  const { sql, values } = seedSql(r);
  const t = Date.now();
  const [, res] = await env.DB.batch([env.DB.prepare("INSERT OR IGNORE INTO pki_ids (id) VALUES (?1), (?2)").bind(r.mountId, r.issuerId), env.DB.prepare(sql).bind(...values)]);
  return Response.json({ written: res?.meta.changes ?? 0, ms: Date.now() - t });
}

/** Row counts of a mount (the bench's own bookkeeping, not a service path). */
async function counts(env: Env, mountId: string): Promise<Response> {
  const [c, r] = await env.DB.batch([
    env.DB.prepare("SELECT count(*) AS n FROM pki_certs WHERE mount_no = (SELECT no FROM pki_ids WHERE id = ?1)").bind(mountId),
    env.DB.prepare("SELECT count(*) AS n FROM pki_revoked WHERE mount_id = ?1").bind(mountId),
  ]);
  return Response.json({ certs: (c?.results[0] as { n: number }).n, revoked: (r?.results[0] as { n: number }).n });
}

export default {
  ...worker,
  fetch(request: Request, env: Env, ctx: ExecutionContext): Response | Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/__bench/seed" && request.method === "POST") return seed(request, env);
    if (url.pathname === "/__bench/counts") return counts(env, url.searchParams.get("mount") ?? "");
    if (url.pathname === "/__bench/alarm-stats") {
      const out = Response.json({ alarms: alarmStats.alarms, maxStatements: alarmStats.maxStatements, statements: alarmStats.statements });
      if (request.method === "DELETE") Object.assign(alarmStats, { alarms: 0, maxStatements: 0, statements: 0 });
      return out;
    }
    return worker.fetch(request, env, ctx);
  },
} satisfies ExportedHandler<Env>;
