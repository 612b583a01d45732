/**
 * Reading an external secret back (issue 15 rule 3, drift): what the provider holds now under a
 * name Lanyard wrote, for reconciliation (../reconcile.ts) to compare with what Lanyard last
 * wrote. One reader per type, typed so that the compiler refuses a type without one. Where the
 * provider returns the value (the three cloud stores, the web host's decrypted read) the reader
 * returns it; the repository host never returns a value, so its reader returns the secret's
 * `updated_at`. A reader never logs or echoes the value: it goes straight to the HMAC comparison.
 */
import type { DestinationType } from "../destinations/types";
import { readCloudone } from "./cloudone-sm/read";
import { readCloudthree } from "./cloudthree-sm/read";
import { readCloudtwo } from "./cloudtwo-kv/read";
import { readRepohost } from "./repohost/read";
import type { ReadBack } from "./read-back";
import type { ConnectorContext } from "./types";
import { readWebhost } from "./webhost-project/read";

export type { ReadBack };

export type Reader = (ctx: ConnectorContext, name: string) => Promise<ReadBack>;

export const READERS: Record<DestinationType, Reader> = {
  "cloudone-sm": readCloudone,
  "cloudtwo-kv": readCloudtwo,
  "cloudthree-sm": readCloudthree,
  repohost: readRepohost,
  "webhost-project": readWebhost,
};
