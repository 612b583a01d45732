/** The engine's dependencies for a request. */
import { loadConfig } from "../../../core/config";
import type { Req } from "../../../core/route";
import type { EngineDeps } from "../engine";

export function engineDeps(req: Req): EngineDeps {
  return { env: req.env, db: req.db, keys: loadConfig(req.env).seal };
}
