/**
 * The `cloudthree-sm` provider: a Google-like secret manager (Vault's gcp-sm). Its connection
 * fields and their validation (./destination.ts), the connector that writes and removes secrets
 * (./connector.ts), the read-back for drift (./read.ts), the rate limits (./limits.ts) and the
 * endpoint variable of its client (./client.ts).
 */
import type { SyncProvider } from "../types";
import { ENDPOINT_VAR } from "./client";
import { cloudthreeConnector } from "./connector";
import { destination } from "./destination";
import { limits } from "./limits";
import { readCloudthree } from "./read";

export const cloudthreeSm: SyncProvider = {
  ...destination,
  vaultType: "gcp-sm",
  endpointVar: ENDPOINT_VAR,
  connector: cloudthreeConnector,
  read: readCloudthree,
  limits,
};
