/** Default and maximum lease TTL of every mount and token unless tuned (768h, docs/http-conventions.md). */
export const SYSTEM_MAX_TTL = 768 * 3600;

/**
 * Deepest namespace ("a/b/…/", segments counted) and longest mount path (segments). A request's
 * first D1 batch looks up every prefix of its path as a possible namespace and as a possible
 * mount, one bound parameter each, and D1 allows 100 per statement: a 150-segment URL used to
 * be a 500 without a token. Nothing deeper can be created, so the lookups try at
 * most these many prefixes and longer paths still resolve. Documented in docs/security.md.
 */
export const MAX_NAMESPACE_DEPTH = 32;
export const MAX_MOUNT_PATH_SEGMENTS = 32;

/**
 * The longest URL a stored configuration field takes, in bytes (docs/security.md "Input limits").
 * Stored URLs are read back by later requests, some anonymous (an ACME directory, a login), so
 * their size bounds what every such request costs. 2048 bytes holds any URL a browser or a
 * provider hands out (RFC 9110 §4.1 recommends at least 8000 octets for request targets; a base
 * URL that is configured, not generated, needs far less) and matches the `uri_sans` limit.
 */
export const MAX_URL_BYTES = 2048;
