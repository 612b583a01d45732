/**
 * A sync provider: everything Lanyard knows about one destination type, in one value that lives
 * in the provider's own folder (./<type>/index.ts) and is registered once (./registry.ts).
 * docs/architecture.md "Adding a sync provider" walks through it.
 */
import type { Connector, Reader } from "../connectors/types";
import type { DestinationDef, EndpointVar } from "../destinations/types";
import type { ProviderLimits } from "../limits/types";

export interface SyncProvider extends DestinationDef {
  /** Vault's name of the type (aws-sm, gh, …), accepted wherever a type appears in a path or a body. */
  vaultType: string;
  /**
   * The operator variable that sends every call of the provider to another host: development
   * only, since src/core/config.ts refuses every `*_ENDPOINT` variable in production.
   */
  endpointVar: EndpointVar;
  /** Writes and removes external secrets. */
  connector: Connector;
  /** Reads an external secret back, for drift. */
  read: Reader;
  /** Rate limits, limit scope and throttling answers. */
  limits: ProviderLimits;
}
