/**
 * The test D1 binding with its prepared statements counted, for tests that bound how many
 * statements a job makes (one Worker invocation may make at most 1,000 D1 queries).
 */
import { env } from "cloudflare:test";

/** env.DB with its prepared statements counted (drizzle prepares each statement once, batched or not). */
export function counted(): { db: D1Database; count: () => number } {
  let n = 0;
  const db = new Proxy(env.DB, {
    get(target, prop) {
      if (prop === "prepare") {
        return (sql: string) => {
          n++;
          return target.prepare(sql);
        };
      }
      const v: unknown = Reflect.get(target, prop);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  return { db, count: () => n };
}
