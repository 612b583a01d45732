import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

// Two projects:
// - "workers": unit and integration tests inside workerd (the Workers pool) against D1 migrated
//   from migrations/. Storage is isolated per test file; tests within a file share it
//   (workers-stack.md §5).
// - "e2e": Node tests that start the Worker once with wrangler's programmatic API and talk HTTP
//   to it, so that they can run openssl on what it returns (workerd cannot spawn processes).
export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  return {
    test: {
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
                },
              },
            }),
          ],
          test: {
            name: "workers",
            include: ["test/unit/**/*.test.ts", "test/integration/**/*.test.ts"],
            setupFiles: ["./test/apply-migrations.ts"],
            testTimeout: 60_000,
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
          },
        },
      ],
    },
  };
});
