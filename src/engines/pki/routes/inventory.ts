/**
 * The certificate inventory's routes (docs/pki-inventory.md): LIST certs/detailed (OpenBao's
 * path; also POST with the parameters in a JSON body), GET certs/counts and GET
 * certs/expiry-histogram. Logic in ../inventory/inventory.ts.
 */
import { route } from "../../../core/route";
import { countsByState, expiryHistogram, listDetailed } from "../inventory/inventory";
import { mountOf } from "./common";

export const inventoryRoutes = [
  route({
    pattern: "certs/detailed",
    handlers: {
      list: async (req) => ({ data: { ...(await listDetailed(req.db, mountOf(req), req.body)) } }),
      update: async (req) => ({ data: { ...(await listDetailed(req.db, mountOf(req), req.body)) } }),
    },
  }),
  route({
    pattern: "certs/counts",
    handlers: { read: async (req) => ({ data: { ...(await countsByState(req.db, mountOf(req), req.body)) } }) },
  }),
  route({
    pattern: "certs/expiry-histogram",
    handlers: { read: async (req) => ({ data: { ...(await expiryHistogram(req.db, mountOf(req), req.body)) } }) },
  }),
];
