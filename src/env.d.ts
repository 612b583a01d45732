// Secrets are not in wrangler.toml, so `wrangler types` cannot see them; declare them here.
declare namespace Cloudflare {
  interface Env {
    ROOT_TOKEN?: string;
    SEAL_KEY?: string;
    /** Comma-separated former SEAL_KEY values, still used to open rows sealed before a rotation. */
    SEAL_KEYS_PREVIOUS?: string;
    /** Optional base URLs replacing the sync providers' public endpoints; development and tests only (docs/configuration.md). Production refuses any *_ENDPOINT variable (src/core/config.ts), declared here or not. */
    CLOUDONE_ENDPOINT?: string;
    CLOUDTWO_ENDPOINT?: string;
    CLOUDTHREE_ENDPOINT?: string;
    REPOHOST_ENDPOINT?: string;
    WEBHOST_ENDPOINT?: string;
    /** "true" lets config/external-policy use a plain http:// service URL (docs/pki-external-policy.md). */
    EXTERNAL_POLICY_ALLOW_HTTP?: string;
    /** "true" lets auth methods call plain http:// JWKS, discovery and TokenReview URLs (src/core/outbound-url.ts). */
    AUTH_ALLOW_HTTP?: string;
    /** "true" allows plain http:// notification targets (docs/pki-notifications.md). */
    NOTIFY_ALLOW_HTTP?: string;
    /** Development only: host:port every ACME http-01 validation connects to, still with Host: <identifier> (docs/pki-acme.md). */
    ACME_HTTP01_TARGET?: string;
    /** Development only: comma-separated seconds replacing the ACME validation retry delays (docs/pki-acme.md "Patient validation"). */
    ACME_RETRY_DELAYS_S?: string;
    /** Largest storage snapshot a restore accepts, in bytes as sent (default 100000000; docs/configuration.md). */
    MAX_SNAPSHOT_BYTES?: string;
    /** Staleness bound of the hot-path read caches in ms (default 1000, 0 = off; src/core/read-cache.ts). */
    CACHE_TTL_MS?: string;
    /** "true" (benchmarks, development only): count D1 round trips per request and answer them in X-Lanyard-D1 (src/core/db/bench-d1.ts). */
    BENCH_COUNT_D1?: string;
    /** Milliseconds added before every D1 round trip (benchmarks, development only; src/core/db/bench-d1.ts). */
    BENCH_D1_DELAY_MS?: string;
    /** "true": sys/metrics answers without a token (docs/configuration.md); "false" or unset: a token with read on sys/metrics. */
    METRICS_UNAUTHENTICATED?: string;
    /** Optional Workers Analytics Engine dataset: one data point per request (src/app/request-metrics.ts, docs/operations.md "Metrics"). */
    METRICS_DATASET?: AnalyticsEngineDataset;
  }
}
