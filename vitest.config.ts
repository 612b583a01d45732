import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

// Unit tests that need no Workers runtime: no `cloudflare:test`, no D1, Durable Object or queue,
// no `cloudflare:workers` import down their module graph, and no crypto whose point is how
// workerd behaves. Node 20's globalThis.crypto is WebCrypto. They run in plain Node, which skips
// the per-file workerd setup. A unit test not listed here runs in the Workers pool, which always
// works; the ones kept there: pki-asn1 (imports the Authority Durable Object module; key
// import/export round trips in workerd), sync-rsa (RSA key import as workerd does it),
// sync-destination-types (`cloudflare:test` env).
const NODE_UNIT_TESTS = [
  "acl",
  "acme-validate",
  "acme-validate-parsing",
  "architecture",
  "audit-filter",
  "audit-hmac",
  "audit-hmac-sha256",
  "auth-jwt",
  "auth-login",
  "caches-doc",
  "console-search",
  "cidr",
  "code-size",
  "core-body",
  "core-encoding",
  "duration",
  "fields",
  "glob",
  "group-commit",
  "ip",
  "ip-agreement",
  "json-limits",
  "kv-service",
  "linear-text",
  "metrics-format",
  "pki-crl-der",
  "pki-names",
  "pki-serial",
  "pki-tidy",
  "pki-ttl",
  "policy-parser",
  "public-answers",
  "references",
  "request",
  "seal",
  "sync-connectors",
  "sync-engine",
  "sync-hosts",
  "sync-limits",
  "sync-sealed-box-kat",
  "sync-template",
].map((name) => `test/unit/${name}.test.ts`);

// Three projects:
// - "unit-node": the unit tests above, in plain Node (environment node).
// - "workers": the other unit tests and the integration tests inside workerd (the Workers pool)
//   against D1 migrated from migrations/. Storage is isolated per test file; tests within a file
//   share it (the pool's isolation: each test file gets its own D1, KV, R2 and Durable Object
//   storage, kept for all the tests of that file).
// - "e2e": Node tests that start the Worker once with wrangler's programmatic API and talk HTTP
//   to it, so that they can run openssl on what it returns (workerd cannot spawn processes).
export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  return {
    test: {
      // Two files at a time. Vitest's default on a 2-core machine is one, and most of a file's
      // time is waiting (workerd start-up, D1, queue backoff, timers), not CPU: the whole suite ran
      // in 495 s with two against 791 s with one on this machine (CI allows 15 minutes).
      maxWorkers: 2,
      projects: [
        {
          plugins: [
            cloudflareTest({
              main: "./src/app/index.ts",
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: {
                bindings: {
                  TEST_MIGRATIONS: migrations,
                  ENVIRONMENT: "development",
                  ROOT_TOKEN: "test-root-token-0123456789",
                  // 32 fixed bytes, base64: tests only.
                  SEAL_KEY: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
                  // ACME patient validation: 6 attempts over 5 s instead of 90 s (docs/pki-acme.md).
                  ACME_RETRY_DELAYS_S: "1,1,1,1,1",
                },
              },
            }),
          ],
          test: {
            name: "workers",
            include: ["test/unit/**/*.test.ts", "test/integration/**/*.test.ts"],
            exclude: NODE_UNIT_TESTS,
            setupFiles: ["./test/apply-migrations.ts"],
            testTimeout: 60_000,
          },
        },
        {
          test: {
            name: "unit-node",
            environment: "node",
            include: NODE_UNIT_TESTS,
            // The tree-walking tests (code size, references, caches table) parse all of src/, and a
            // few unit tests run real crypto: seconds, not milliseconds, on a loaded 2-core machine.
            testTimeout: 30_000,
          },
        },
        {
          test: {
            name: "e2e",
            environment: "node",
            include: ["test/e2e/**/*.test.ts"],
            globalSetup: ["./test/e2e/global-setup.ts"],
            testTimeout: 60_000,
            hookTimeout: 120_000,
            // After the other projects, not beside them: with the Workers pool saturating both
            // cores, wrangler's dev proxy twice answered an e2e burst (100 concurrent revocations,
            // 200 concurrent issues) with "Your worker restarted mid-request". Alone it never did.
            sequence: { groupOrder: 1 },
          },
        },
      ],
    },
  };
});
