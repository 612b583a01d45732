/**
 * Every destination type, in one table typed so that the compiler refuses a type without its
 * definition (DESIGN.md "Connectors ... one registry typed so the compiler forces every type in").
 */
import { cloudoneSm } from "./cloudone-sm";
import { cloudthreeSm } from "./cloudthree-sm";
import { cloudtwoKv } from "./cloudtwo-kv";
import { repohost } from "./repohost";
import type { DestinationDef, DestinationType } from "./types";
import { webhostProject } from "./webhost-project";

export const DESTINATIONS: Record<DestinationType, DestinationDef> = {
  "cloudone-sm": cloudoneSm,
  "cloudtwo-kv": cloudtwoKv,
  "cloudthree-sm": cloudthreeSm,
  repohost,
  "webhost-project": webhostProject,
};
