/**
 * Who is calling and what they may do: the types every layer shares. The auth layer fills them
 * (src/auth/: token storage, policy parsing, the ACL); core and the engines only read them, so
 * they live here and the dependency rule `core ← auth ← engines ← app` holds.
 */
import type { tokens } from "./db/schema";

/** Capabilities a policy rule can grant (the engine's policy syntax). */
export const CAPABILITIES = ["create", "read", "update", "patch", "delete", "list", "sudo", "deny"] as const;
export type Capability = (typeof CAPABILITIES)[number];

/** What a request does, after verb mapping (`LIST`/`?list=true` → list, POST/PUT → update…). */
export type Operation = "read" | "list" | "create" | "update" | "patch" | "delete";

export type TokenRow = typeof tokens.$inferSelect;

/** The authenticated caller. `configuredRoot` is the ROOT_TOKEN itself. */
export interface TokenEntry extends TokenRow {
  configuredRoot: boolean;
  /** The token text as presented, kept only for this request (lookup-self returns it as `id`). */
  presented: string;
}
