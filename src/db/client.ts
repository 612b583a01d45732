import { drizzle } from "drizzle-orm/d1";
import * as schema from "./schema";

/** The Drizzle handle every repository module uses. D1 has no interactive transactions: use db.batch. */
export function openDb(d1: D1Database) {
  return drizzle(d1, { schema });
}

export type Db = ReturnType<typeof openDb>;
