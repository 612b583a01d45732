/**
 * Running a plan against the provider (./plan.ts decides it, ./engine.ts drives it): each write
 * and delete through the destination's connector, in order, stopping at the first failure, with
 * the ledger recording ownership and writes as they happen. Never deletes what Lanyard did not
 * create (docs/secrets-sync.md "2. Never delete what Lanyard did not create").
 */
import type { ExternalEntry } from "./association-store";
import type { ConnectorContext, PutResult } from "./connectors/types";
import type { Ownership } from "./external-store";
import type { Plan, PlannedPut } from "./plan";
import { providerOf } from "./providers/registry";

/** What the engine records about each external name while it runs a plan (./external-store.ts). */
export interface Ledger {
  /** The recorded ownership of a name; undefined before its first write. */
  ownership(name: string): Ownership | undefined;
  /**
   * Whether the name's tags are as a write now would set them: its ownership is known and its
   * last write was made in a round that read the destination after its last change (written_at
   * is that round's start, below), so the custom tags it set are the current ones.
   */
  tagsCurrent(name: string): boolean;
  /** What the name's last write recorded as the provider's version; undefined before it. */
  version(name: string): string | undefined;
  written(p: PlannedPut, r: PutResult): Promise<void>;
  /**
   * The records of the writes made so far, as statements for the round's outcome batch
   * (./association-runs.ts finishRound runs them whatever the outcome): one round trip fewer
   * per written name. Taking them empties the list.
   */
  takeRecords(): D1PreparedStatement[];
  /** The name is gone from the provider, or (pre-existing) left there: its claim is released. */
  released(name: string): Promise<void>;
}

/**
 * Runs a plan; stops at the first failure. Returns what the provider holds afterwards, and the
 * pre-existing names it left in place instead of deleting them.
 */
export async function execute(
  ctx: ConnectorContext,
  plan: Plan,
  previous: Record<string, ExternalEntry>,
  ledger: Ledger,
): Promise<{ external: Record<string, ExternalEntry>; error: unknown; left: string[] }> {
  const connector = providerOf(ctx.dest.type).connector;
  const external: Record<string, ExternalEntry> = { ...previous };
  const left: string[] = [];
  try {
    for (const p of plan.puts) {
      if (plan.skip?.has(p.name)) continue;
      // A rename under the same sub-key keeps the old name on record (key "<sub>\0old") until
      // the removes below delete it at the provider, so a failure in between orphans nothing.
      const ownership = ledger.ownership(p.name);
      const version = ledger.version(p.name);
      const r = await connector.put(
        ctx,
        ownership === undefined
          ? { name: p.name, value: p.value }
          : { name: p.name, value: p.value, ownership, tagsCurrent: ledger.tagsCurrent(p.name), ...(version === undefined ? {} : { version }) },
      );
      await ledger.written(p, r);
      const old = external[p.subKey];
      if (old && old.name !== p.name) external[`${p.subKey}\u0000old`] = old;
      external[p.subKey] = { name: p.name, status: "SYNCED", updatedAt: Date.now() };
    }
    for (const r of plan.removes) {
      // Never delete what Lanyard did not create (docs/secrets-sync.md "2. Never delete what Lanyard did not create"): a pre-existing secret stays.
      // A connector whose names are several objects deletes only the ones Lanyard recorded.
      const ownership = ledger.ownership(r.name);
      const version = ledger.version(r.name);
      if (ownership === "pre_existing") left.push(r.name);
      if (ownership !== "pre_existing" || connector.removesOnlyOwnParts) await connector.remove(ctx, r.name, { ownership, ...(version === undefined ? {} : { version }) });
      await ledger.released(r.name);
      // r.name is not wanted any more, so no entry written above carries it.
      for (const [k, e] of Object.entries(external)) if (e.name === r.name) delete external[k];
    }
    for (const k of Object.keys(external)) if (k.endsWith("\u0000old")) delete external[k];
    return { external, error: null, left };
  } catch (e) {
    return { external, error: e, left };
  }
}
