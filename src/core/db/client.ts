import { drizzle } from "drizzle-orm/d1";

/**
 * The Drizzle handle every repository module uses. D1 has no interactive transactions: use db.batch.
 * No schema is passed: nothing uses Drizzle's relational queries (db.query.*), and building their
 * table map on every request cost CPU on every request (npm run bench).
 *
 * With `counter` (the benchmark's BENCH_COUNT_D1 flag, src/app/app.ts), every round trip to D1
 * made through this handle is counted: a batch is one, a single statement is one.
 */
export function openDb(d1: D1Database, counter?: D1Counter) {
  return drizzle(counter ? countingD1(d1, counter) : d1);
}

export type Db = ReturnType<typeof openDb>;

export interface D1Counter {
  roundTrips: number;
}

/** D1 with its round trips counted (benchmarks only: one more object per statement). */
function countingD1(d1: D1Database, counter: D1Counter): D1Database {
  const count = <T>(p: Promise<T>): Promise<T> => {
    counter.roundTrips++;
    return p;
  };
  const statement = (s: D1PreparedStatement): D1PreparedStatement =>
    new Proxy(s, {
      get(target, prop) {
        if (prop === RAW) return target;
        if (prop === "bind") return (...values: unknown[]) => statement(target.bind(...values));
        if (prop === "first" || prop === "all" || prop === "run" || prop === "raw") {
          const fn = target[prop] as (...a: unknown[]) => Promise<unknown>;
          return (...a: unknown[]) => count(fn.apply(target, a));
        }
        const v: unknown = Reflect.get(target, prop, target);
        return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  return new Proxy(d1, {
    get(target, prop) {
      if (prop === "prepare") return (q: string) => statement(target.prepare(q));
      if (prop === "batch") return (stmts: D1PreparedStatement[]) => count(target.batch(stmts.map(unwrap)));
      if (prop === "exec") return (q: string) => count(target.exec(q));
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** D1's batch wants its own statement objects, not proxies of them. */
const RAW = Symbol("raw statement");
function unwrap(s: D1PreparedStatement): D1PreparedStatement {
  const raw: unknown = Reflect.get(s, RAW);
  return raw ? (raw as D1PreparedStatement) : s;
}
