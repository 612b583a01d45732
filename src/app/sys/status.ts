/**
 * What Vault clients ask before anything else, all unauthenticated as in Vault
 * (Vault API: /sys/health, /sys/seal-status, /sys/leader): `sys/health`, `sys/seal-status` and `sys/leader`. They answer
 * even when the service is not configured, so an operator can see why it refuses: that state is
 * reported as "sealed" (Vault's word for "cannot serve yet").
 *
 * Lanyard is one logical node: never a standby, never a DR or performance secondary, HA off.
 */
import { errorResponse, jsonResponse } from "../../core/envelope";

/**
 * The version clients see. Terraform's provider parses the seal-status `version` with
 * hashicorp/go-version (`version.NewSemver`) to decide which API features exist, and treats
 * `+ent` metadata as Enterprise; so this is a plain semver with `+lanyard` build metadata. 1.16
 * is the first Vault release whose API has secrets sync (sys/sync, sys/activation-flags).
 */
export const VAULT_COMPAT_VERSION = "1.16.0+lanyard";
const BUILD_DATE = "2026-01-01T00:00:00Z";
export const CLUSTER_NAME = "lanyard";
/** One logical cluster per deployment; Vault reports a UUID here. */
export const CLUSTER_ID = "6c616e79-6172-6400-0000-000000000001";

/** Vault's sys/health status-code parameters and their defaults (sys_health.go). */
const CODE_PARAMS: Record<string, number> = {
  activecode: 200,
  standbycode: 429,
  drsecondarycode: 472,
  performancestandbycode: 473,
  haunhealthycode: 474,
  removedcode: 530,
  sealedcode: 503,
  uninitcode: 501,
};

/** Go's strconv.ParseBool. */
function parseGoBool(v: string): boolean | null {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(v)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(v)) return false;
  return null;
}

/**
 * `GET|HEAD sys/health`. Query parameters as Vault's: `standbyok`/`perfstandbyok` (bools; they
 * matter only on standbys, which Lanyard never is) and the status codes above. A code that is
 * not an integer, or a bad bool, is 400 naming the parameter (Vault sends `{"errors":[]}`; the
 * contract wants the field named). Status order: not
 * initialised → uninitcode, sealed → sealedcode, else activecode. Lanyard is always initialised
 * (there is no init step); a configuration problem reports sealed.
 */
export function healthResponse(url: URL, problem: string | null, requestId: string): Response {
  const codes: Record<string, number> = { ...CODE_PARAMS };
  for (const [name, value] of url.searchParams) {
    if (name in CODE_PARAMS) {
      if (!/^-?\d+$/.test(value.trim())) return errorResponse(400, [`${name}: must be an integer status code`], requestId);
      codes[name] = Number(value.trim());
    } else if (name === "standbyok" || name === "perfstandbyok") {
      if (value !== "" && parseGoBool(value) === null) return errorResponse(400, [`${name}: must be a boolean`], requestId);
    }
  }
  const sealed = problem !== null;
  const status = sealed ? (codes.sealedcode as number) : (codes.activecode as number);
  const body: Record<string, unknown> = {
    initialized: true,
    sealed,
    standby: false,
    performance_standby: false,
    replication_performance_mode: "disabled",
    replication_dr_mode: "disabled",
    server_time_utc: Math.floor(Date.now() / 1000),
    version: VAULT_COMPAT_VERSION,
    enterprise: false,
    echo_duration_ms: 0,
    clock_skew_ms: 0,
    replication_primary_canary_age_ms: 0,
    // Vault omits the cluster while sealed.
    ...(sealed ? { error: problem } : { cluster_name: CLUSTER_NAME, cluster_id: CLUSTER_ID }),
  };
  // A Response cannot carry a status outside 200–599 (Vault would send e.g. 299 as asked).
  const safe = status >= 200 && status <= 599 ? status : 200;
  // Statuses that cannot carry a body (e.g. activecode=204) answer without one.
  if ([204, 205, 304].includes(safe)) return new Response(null, { status: safe, headers: { "x-request-id": requestId, "cache-control": "no-store" } });
  return jsonResponse(body, safe, requestId);
}

/**
 * `GET sys/seal-status`: raw JSON, no envelope (Vault's GetSealStatus). `vault status` exits 2 on
 * `sealed:true`; Terraform's provider reads `version`.
 */
export function sealStatusResponse(problem: string | null, requestId: string): Response {
  const sealed = problem !== null;
  return jsonResponse(
    {
      type: "shamir",
      initialized: true,
      sealed,
      t: 1,
      n: 1,
      progress: 0,
      nonce: "",
      version: VAULT_COMPAT_VERSION,
      build_date: BUILD_DATE,
      migration: false,
      ...(sealed ? {} : { cluster_name: CLUSTER_NAME, cluster_id: CLUSTER_ID }),
      recovery_seal: false,
      storage_type: "d1",
    },
    200,
    requestId,
  );
}

/** `GET sys/leader`: raw JSON. HA is off, so Vault sends ha_enabled false and zero values. */
export function leaderResponse(requestId: string): Response {
  return jsonResponse(
    {
      ha_enabled: false,
      is_self: false,
      active_time: "0001-01-01T00:00:00Z",
      leader_address: "",
      leader_cluster_address: "",
      performance_standby: false,
      performance_standby_last_remote_wal: 0,
      last_wal: 0,
    },
    200,
    requestId,
  );
}
