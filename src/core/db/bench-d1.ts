/**
 * The benchmarks' D1 instrument (`npm run bench -- issue` and `-- latency`,
 * docs/pki-issuance-benchmark.md): a wrapper around the D1 binding that counts every round trip
 * and, with `BENCH_D1_DELAY_MS`, waits that long before each one, as a Worker far from the
 * database's primary does on Cloudflare. A round trip is one statement's first/all/run/raw, one
 * batch or one exec, on the binding or on a session of it (withSession). The certificate bodies'
 * R2 bucket (`CERTS`) is a regional store too: each of its calls (get, put, head, delete, list)
 * waits the same delay and is counted apart (`r2Calls`), since a stored issue makes its put
 * concurrently with its D1 batch and the two overlap.
 *
 * Development only: `BENCH_COUNT_D1` and `BENCH_D1_DELAY_MS`, like every `BENCH_*` variable, make
 * the service refuse to run outside `ENVIRONMENT=development` (src/core/config.ts), so a
 * deployment can never be slowed or instrumented by one. Without them `benchEnv` returns the env
 * it was given (two property reads per request).
 *
 * Applied where a binding enters: the Worker's fetch (src/app/app.ts) and the Authority Durable
 * Object's constructor, so a DO's D1 reads that a request waits for are delayed and counted too.
 * The count is one number per isolate (`d1RoundTrips`); a request's count is its difference over
 * the request, which is exact only while no other request runs (the bench's probes are sent one
 * at a time). Locally the Durable Objects of the Worker's script run in the Worker's isolate, so
 * their round trips land in the same number; on Cloudflare they would not, which does not matter
 * for a development-only instrument.
 */

/** The variables that turn the instrument on. */
interface BenchVars {
  DB: D1Database;
  CERTS?: R2Bucket;
  ENVIRONMENT?: string;
  BENCH_COUNT_D1?: string;
  BENCH_D1_DELAY_MS?: string;
}

let roundTrips = 0;
let r2 = 0;

/** R2 calls made so far through a wrapped bucket in this isolate. */
export function r2Calls(): number {
  return r2;
}

/** Round trips made so far through a wrapped binding in this isolate. */
export function d1RoundTrips(): number {
  return roundTrips;
}

/** The delay in ms asked for, 0 when none; NaN for a value that is not a whole number from 0 to 10000. */
export function parseD1Delay(v: string | undefined): number {
  if (v === undefined || v.trim() === "") return 0;
  return /^\d{1,5}$/.test(v.trim()) && Number(v) <= 10_000 ? Number(v) : NaN;
}

/** True when the instrument is on for this env (development only). */
export function benchD1Enabled(env: BenchVars): boolean {
  if (env.ENVIRONMENT !== "development") return false;
  return env.BENCH_COUNT_D1 === "true" || parseD1Delay(env.BENCH_D1_DELAY_MS) > 0;
}

/** One wrapped binding per raw binding and delay (the runtime hands the same object to each request). */
const wrapped = new WeakMap<D1Database, { delay: number; db: D1Database }>();
const wrappedBuckets = new WeakMap<R2Bucket, { delay: number; bucket: R2Bucket }>();

/** `env` with its DB wrapped when the instrument is on; `env` itself otherwise. */
export function benchEnv<E extends BenchVars>(env: E): E {
  if (env.BENCH_COUNT_D1 === undefined && env.BENCH_D1_DELAY_MS === undefined) return env;
  if (!benchD1Enabled(env)) return env;
  const delay = parseD1Delay(env.BENCH_D1_DELAY_MS) || 0;
  let w = wrapped.get(env.DB);
  if (!w || w.delay !== delay) {
    w = { delay, db: instrumented(env.DB, delay) };
    wrapped.set(env.DB, w);
  }
  if (!env.CERTS) return { ...env, DB: w.db };
  let b = wrappedBuckets.get(env.CERTS);
  if (!b || b.delay !== delay) {
    b = { delay, bucket: instrumentedBucket(env.CERTS, delay) };
    wrappedBuckets.set(env.CERTS, b);
  }
  return { ...env, DB: w.db, CERTS: b.bucket };
}

const R2_CALLS: ReadonlySet<string | symbol> = new Set(["get", "put", "head", "delete", "list"]);

/** The bucket with each call counted and, with a delay, waiting it first. */
function instrumentedBucket(bucket: R2Bucket, delay: number): R2Bucket {
  return new Proxy(bucket, {
    get(target, prop) {
      if (!R2_CALLS.has(prop)) return passThrough(target, prop);
      const fn = Reflect.get(target, prop, target) as (...a: unknown[]) => Promise<unknown>;
      return (...a: unknown[]) => {
        r2++;
        if (delay <= 0) return fn.apply(target, a);
        return new Promise<void>((resolve) => setTimeout(resolve, delay)).then(() => fn.apply(target, a));
      };
    },
  });
}

/** One round trip: counted, then (with a delay) the network's share before the call. */
function roundTrip<T>(delay: number, call: () => Promise<T>): Promise<T> {
  roundTrips++;
  if (delay <= 0) return call();
  return new Promise<void>((resolve) => setTimeout(resolve, delay)).then(call);
}

/** A bound method of `target`, or the property itself. */
function passThrough(target: object, prop: string | symbol): unknown {
  const v: unknown = Reflect.get(target, prop, target);
  return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
}

/** D1's batch wants its own statement objects, not proxies of them. */
const RAW = Symbol("raw statement");
function unwrap(s: D1PreparedStatement): D1PreparedStatement {
  const raw: unknown = Reflect.get(s, RAW);
  return raw ? (raw as D1PreparedStatement) : s;
}

function statement(s: D1PreparedStatement, delay: number): D1PreparedStatement {
  return new Proxy(s, {
    get(target, prop) {
      if (prop === RAW) return target;
      if (prop === "bind") return (...values: unknown[]) => statement(target.bind(...values), delay);
      if (prop === "first" || prop === "all" || prop === "run" || prop === "raw") {
        const fn = target[prop] as (...a: unknown[]) => Promise<unknown>;
        return (...a: unknown[]) => roundTrip(delay, () => fn.apply(target, a));
      }
      return passThrough(target, prop);
    },
  });
}

/** The binding, or one of its sessions: prepare, batch and exec go through the instrument. */
function instrumented<D extends D1Database | D1DatabaseSession>(d1: D, delay: number): D {
  return new Proxy(d1, {
    get(target, prop) {
      if (prop === "prepare") return (q: string) => statement(target.prepare(q), delay);
      if (prop === "batch") return (stmts: D1PreparedStatement[]) => roundTrip(delay, () => target.batch(stmts.map(unwrap)));
      if (prop === "exec" && "exec" in target) return (q: string) => roundTrip(delay, () => target.exec(q));
      if (prop === "withSession" && "withSession" in target) {
        return (constraint?: string) => instrumented(target.withSession(constraint as D1SessionBookmark), delay);
      }
      return passThrough(target, prop);
    },
  });
}
