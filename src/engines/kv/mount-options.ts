/**
 * How sys/mounts enables a KV mount: Lanyard serves version 2 of Vault's KV engine only. A mount
 * is enabled as `kv-v2`, or as `kv` with `options.version` "2" (or no version, which Lanyard
 * takes as 2 where Vault would take 1: a version 1 mount is refused, never made silently), and
 * always reads back with `options.version` "2", which is what `vault kv` looks for to use the
 * data/ and metadata/ paths (Vault API: /v1/sys/internal/ui/mounts/:path).
 */
import { badRequest } from "../../core/errors";
import type { EngineMounts } from "../../core/engine";

const VERSION_2 = { version: "2" } as const;

export const kvMountOptions = {
  aliases: { "kv-v2": "kv" },
  normalizeOptions(asked, options) {
    // "kv-v2" names the version itself; a version in its options is checked by checkOption.
    if (asked === "kv") {
      const v = options.version === undefined ? "2" : String(options.version);
      if (v !== "2") throw badRequest(`options.version: only version "2" of the kv engine is supported, got "${v}"`);
    }
    return { ...VERSION_2 };
  },
  checkOption(key, value, field) {
    if (key !== "version") return false;
    if (String(value) !== "2") throw badRequest(`${field}: only version "2" of the kv engine is supported, got "${String(value).slice(0, 16)}"`);
    return true;
  },
  defaultOptions: VERSION_2,
  policySubtrees: ["data/", "metadata/"],
} satisfies Partial<EngineMounts>;
