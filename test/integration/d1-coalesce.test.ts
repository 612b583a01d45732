/**
 * Coalesced D1 batches (src/core/db/coalesce.ts, used by the sync queue's consumer):
 * concurrent batch() calls of one turn go to D1 as one batch, each caller gets its own results
 * in its order, and a caller whose statements fail fails alone. Real D1 (Miniflare's SQLite);
 * round trips are counted by wrapping the binding the coalescer sends to.
 */
import { env } from "cloudflare:test";
import { beforeEach, describe, expect, it } from "vitest";
import { coalescingD1 } from "../../src/core/db/coalesce";

/** env.DB with every batch() it receives counted (the round trips the coalescer makes). */
function counted(): { d1: D1Database; batches: number[] } {
  const batches: number[] = [];
  const d1 = new Proxy(env.DB, {
    get(target, prop) {
      if (prop === "batch") {
        return (stmts: D1PreparedStatement[]) => {
          batches.push(stmts.length);
          return target.batch(stmts);
        };
      }
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { d1, batches };
}

describe("coalescingD1", () => {
  beforeEach(async () => {
    await env.DB.exec("CREATE TABLE IF NOT EXISTS coalesce_t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)");
    await env.DB.exec("DELETE FROM coalesce_t");
  });

  it("sends the concurrent batches of one turn as one, and gives each caller its own results in order", async () => {
    const { d1, batches } = counted();
    const db = coalescingD1(d1);
    const callers = Array.from({ length: 10 }, (_, i) =>
      db.batch<{ k: string; v: number }>([
        db.prepare("INSERT INTO coalesce_t (k, v) VALUES (?, ?)").bind(`k${i}`, i),
        db.prepare("UPDATE coalesce_t SET v = v * 10 WHERE k = ?").bind(`k${i}`),
        db.prepare("SELECT k, v FROM coalesce_t WHERE k = ?").bind(`k${i}`),
      ]),
    );
    const results = await Promise.all(callers);
    expect(batches).toEqual([30]);
    results.forEach((r, i) => {
      expect(r).toHaveLength(3);
      expect(r[0]?.meta.changes).toBe(1);
      expect(r[2]?.results).toEqual([{ k: `k${i}`, v: i * 10 }]);
    });
  });

  it("fails only the caller whose statements fail; the others commit", async () => {
    const { d1, batches } = counted();
    const db = coalescingD1(d1);
    await env.DB.prepare("INSERT INTO coalesce_t (k, v) VALUES ('taken', 1)").run();
    const ok1 = db.batch([db.prepare("INSERT INTO coalesce_t (k, v) VALUES ('a', 1)")]);
    const bad = db.batch([
      db.prepare("INSERT INTO coalesce_t (k, v) VALUES ('b', 1)"),
      db.prepare("INSERT INTO coalesce_t (k, v) VALUES ('taken', 2)"),
    ]);
    const ok2 = db.batch([db.prepare("INSERT INTO coalesce_t (k, v) VALUES ('c', 1)")]);
    const [r1, rBad, r2] = await Promise.allSettled([ok1, bad, ok2]);
    expect(r1.status).toBe("fulfilled");
    expect(r2.status).toBe("fulfilled");
    expect(rBad.status).toBe("rejected");
    expect(String((rBad as PromiseRejectedResult).reason)).toMatch(/UNIQUE/);
    // One combined try (rolled back whole), then each caller alone.
    expect(batches).toEqual([4, 1, 2, 1]);
    const rows = await env.DB.prepare("SELECT k FROM coalesce_t ORDER BY k").all<{ k: string }>();
    // 'b' was in the failing caller's batch: rolled back with it.
    expect(rows.results.map((r) => r.k)).toEqual(["a", "c", "taken"]);
  });

  it("never splits a caller, and holds at most 100 statements per combined batch", async () => {
    const { d1, batches } = counted();
    const db = coalescingD1(d1);
    const callers = Array.from({ length: 7 }, (_, i) =>
      db.batch(Array.from({ length: 30 }, (_, j) => db.prepare("INSERT INTO coalesce_t (k, v) VALUES (?, ?)").bind(`c${i}-${j}`, j))),
    );
    await Promise.all(callers);
    expect(batches).toEqual([90, 90, 30]);
    const n = await env.DB.prepare("SELECT count(*) AS n FROM coalesce_t").first<{ n: number }>();
    expect(n?.n).toBe(210);
  });

  it("batches made in later turns go separately", async () => {
    const { d1, batches } = counted();
    const db = coalescingD1(d1);
    await db.batch([db.prepare("SELECT 1")]);
    await db.batch([db.prepare("SELECT 2")]);
    expect(batches).toEqual([1, 1]);
  });
});
