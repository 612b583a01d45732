/**
 * The `webhost-project` provider: a web host's project environment variables (Vault's
 * vercel-project). Its connection fields and their validation (./destination.ts), the connector
 * that writes and removes secrets (./connector.ts), the read-back for drift (./read.ts), the
 * rate limits (./limits.ts) and the endpoint variable of its client (./client.ts).
 */
import type { SyncProvider } from "../types";
import { ENDPOINT_VAR } from "./client";
import { webhostConnector } from "./connector";
import { destination } from "./destination";
import { limits } from "./limits";
import { readWebhost } from "./read";

export const webhostProject: SyncProvider = {
  ...destination,
  vaultType: "vercel-project",
  endpointVar: ENDPOINT_VAR,
  connector: webhostConnector,
  read: readWebhost,
  limits,
};
