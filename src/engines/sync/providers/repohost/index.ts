/**
 * The `repohost` provider: a repository host's Actions secrets (Vault's gh). Its connection
 * fields and their validation (./destination.ts), the connector that writes and removes secrets
 * (./connector.ts), the read-back for drift (./read.ts), the rate limits (./limits.ts) and the
 * endpoint variable of its client (./client.ts).
 */
import type { SyncProvider } from "../types";
import { ENDPOINT_VAR } from "./client";
import { repohostConnector } from "./connector";
import { destination } from "./destination";
import { limits } from "./limits";
import { readRepohost } from "./read";

export const repohost: SyncProvider = {
  ...destination,
  vaultType: "gh",
  endpointVar: ENDPOINT_VAR,
  connector: repohostConnector,
  read: readRepohost,
  limits,
};
