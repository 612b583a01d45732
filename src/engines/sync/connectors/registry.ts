/**
 * Every connector, in one table typed so that the compiler refuses a destination type without
 * one (DESIGN.md "Connectors").
 */
import type { DestinationType } from "../destinations/types";
import { cloudoneConnector } from "./cloudone-sm";
import { cloudthreeConnector } from "./cloudthree-sm";
import { cloudtwoConnector } from "./cloudtwo-kv";
import { repohostConnector } from "./repohost";
import type { Connector } from "./types";
import { webhostConnector } from "./webhost-project";

export const CONNECTORS: Record<DestinationType, Connector> = {
  "cloudone-sm": cloudoneConnector,
  "cloudtwo-kv": cloudtwoConnector,
  "cloudthree-sm": cloudthreeConnector,
  repohost: repohostConnector,
  "webhost-project": webhostConnector,
};
