// Secrets are not in wrangler.toml, so `wrangler types` cannot see them; declare them here.
declare namespace Cloudflare {
  interface Env {
    ROOT_TOKEN?: string;
    SEAL_KEY?: string;
    /** Comma-separated former SEAL_KEY values, still used to open rows sealed before a rotation. */
    SEAL_KEYS_PREVIOUS?: string;
  }
}
