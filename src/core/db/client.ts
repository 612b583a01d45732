import { drizzle } from "drizzle-orm/d1";

/**
 * The Drizzle handle every repository module uses. D1 has no interactive transactions: use db.batch.
 * No schema is passed: nothing uses Drizzle's relational queries (db.query.*), and building their
 * table map on every request cost CPU on every request (npm run bench).
 *
 * The benchmarks count and delay round trips by wrapping the binding itself (./bench-d1.ts).
 */
export function openDb(d1: D1Database) {
  return drizzle(d1);
}

export type Db = ReturnType<typeof openDb>;
