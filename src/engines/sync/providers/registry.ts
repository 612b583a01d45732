/**
 * Every sync provider, registered once: one line per provider. Everything that lists or looks up
 * destination types (routes, queue messages, the engine) derives from this list.
 */
import { cloudoneSm } from "./cloudone-sm";
import { cloudthreeSm } from "./cloudthree-sm";
import { cloudtwoKv } from "./cloudtwo-kv";
import { repohost } from "./repohost";
import type { SyncProvider } from "./types";
import { webhostProject } from "./webhost-project";

export const PROVIDERS: readonly SyncProvider[] = [
  cloudoneSm,
  cloudtwoKv,
  cloudthreeSm,
  repohost,
  webhostProject,
];

const BY_TYPE = new Map(PROVIDERS.map((p) => [p.type, p]));
const BY_VAULT_TYPE = new Map(PROVIDERS.map((p) => [p.vaultType, p]));

/** The registered type names, in registration order. */
export const DESTINATION_TYPES: readonly string[] = PROVIDERS.map((p) => p.type);

export function isDestinationType(s: string): boolean {
  return BY_TYPE.has(s);
}

/** The provider of a type name or of Vault's name for it; null for anything else. Answers always use `type`. */
export function findProvider(s: string): SyncProvider | null {
  return BY_TYPE.get(s) ?? BY_VAULT_TYPE.get(s) ?? null;
}

/** The provider of a registered type (a stored destination's); throws for an unknown one. */
export function providerOf(type: string): SyncProvider {
  const p = BY_TYPE.get(type);
  if (!p) throw new Error(`unknown destination type "${type}"`);
  return p;
}
