/**
 * What a read-back of an external secret found (docs/secrets-sync.md "3. Drift is detected and repaired"): the
 * shape every type's reader (./<type>/read.ts) returns.
 */
export type ReadBack =
  /** Gone: deleted (AWS: also scheduled for deletion; Key Vault: also soft-deleted). */
  | { kind: "absent" }
  /** The current value. */
  | { kind: "value"; value: string }
  /** Present but not as Lanyard left it, without a value to compare (disabled version, other targets). */
  | { kind: "changed" }
  /** Only the provider's last-change time is readable (the repository host). */
  | { kind: "meta"; updatedAt: string };
