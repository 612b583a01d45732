#!/usr/bin/env bash
# Measures the storage snapshot paths (docs/operations.md "Snapshots") on a local `wrangler dev`:
# N KV versions (about 330 bytes each, sealed-looking values) are inserted straight into a fresh
# local D1, then the snapshot is saved and restored with curl; prints the wall time of each, the
# snapshot's size, and the workerd process's peak resident memory (VmHWM) after each step.
# With C > 0, C EC leaves are issued through the API first (8 at a time), so the snapshot also
# carries C certificate bodies from the CERTS bucket and C more rows; the restore is then checked
# by reading the last one back.
# Usage: scripts/bench-snapshot.sh [N=10000] [port=8799] [C=0]
set -euo pipefail
N=${1:-10000}
PORT=${2:-8799}
C=${3:-0}
cd "$(dirname "$0")/.."
DIR=$(mktemp -d)
KEY=AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=
TOKEN=bench-root-token-0123456789
KID=$(python3 -c "import base64,hashlib;print(hashlib.sha256(base64.b64decode('$KEY')).hexdigest()[:8])")
export WRANGLER_SEND_METRICS=false CLOUDFLARE_CF_FETCH_ENABLED=false
npx wrangler d1 migrations apply DB --local --persist-to "$DIR" > /dev/null
npx wrangler d1 execute DB --local --persist-to "$DIR" --command "INSERT INTO mounts (id, namespace_id, path, type, accessor, description, options, default_lease_ttl, max_lease_ttl, created_at) VALUES ('bench', 'root', 'bench/', 'kv', 'kv_bench', '', '{\"version\":\"2\"}', 0, 0, 0); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $N) INSERT INTO kv_versions (mount_id, path, version, sealed_data, created_time, deletion_time, destroyed) SELECT 'bench', 'k' || i, 1, 'v1:$KID:' || hex(randomblob(150)), 0, NULL, 0 FROM n;" > /dev/null
setsid npx wrangler dev --persist-to "$DIR" --port "$PORT" --ip 127.0.0.1 --var ENVIRONMENT:development --var ROOT_TOKEN:$TOKEN --var SEAL_KEY:$KEY > "$DIR/dev.log" 2>&1 &
DEV=$!
trap 'kill -- -$DEV 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$PORT/v1/sys/health" > /dev/null && break; sleep 1; done
WORKERD=$(pgrep -s "$DEV" -f "workerd serve.*inspector-addr" | head -1 || true)
peak() { [ -n "$WORKERD" ] && grep -E 'VmHWM|VmRSS' "/proc/$WORKERD/status" | tr -s ' \n' ' '; echo; }
API="http://127.0.0.1:$PORT/v1"
SERIAL=""
if [ "$C" -gt 0 ]; then
  H=(-sS --fail-with-body -H "X-Vault-Token: $TOKEN")
  curl "${H[@]}" -X POST -d '{"type":"pki"}' "$API/sys/mounts/pki" > /dev/null
  curl "${H[@]}" -X POST -d '{"common_name":"Bench Root","key_type":"ec","not_after":"2036-01-01T00:00:00Z"}' "$API/pki/root/generate/internal" > /dev/null
  curl "${H[@]}" -X POST -d '{"allowed_domains":"example.com","allow_subdomains":true,"max_ttl":"72h","no_store":false}' "$API/pki/roles/web" > /dev/null
  start=$(date +%s.%N)
  seq 1 "$C" | xargs -P 8 -I{} curl "${H[@]}" -o /dev/null -X POST -d '{"common_name":"l{}.example.com","ttl":"1h"}' "$API/pki/issue/web"
  echo "issued $C leaves in $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
  SERIAL=$(curl "${H[@]}" -X POST -d '{"common_name":"last.example.com","ttl":"1h"}' "$API/pki/issue/web" | python3 -c 'import json,sys;print(json.load(sys.stdin)["data"]["serial_number"])')
fi
echo "rows: $N; certificates: $C; workerd before: $(peak)"
/usr/bin/time -f "save: %e s" curl -sS --fail-with-body -H "X-Vault-Token: $TOKEN" -o "$DIR/bench.snap" "http://127.0.0.1:$PORT/v1/sys/storage/raft/snapshot" || { head -c 400 "$DIR/bench.snap"; exit 1; }
echo "snapshot: $(stat -c %s "$DIR/bench.snap") bytes gzip, $(gunzip -c "$DIR/bench.snap" | wc -c) unpacked; workerd after save: $(peak)"
/usr/bin/time -f "restore: %e s" curl -sS --fail-with-body -X POST -H "X-Vault-Token: $TOKEN" --data-binary @"$DIR/bench.snap" "http://127.0.0.1:$PORT/v1/sys/storage/raft/snapshot"
echo "workerd after restore: $(peak)"
if [ -n "$SERIAL" ]; then
  curl -sS --fail-with-body -H "X-Vault-Token: $TOKEN" "$API/pki/cert/$SERIAL" | python3 -c 'import json,sys;d=json.load(sys.stdin)["data"];print("restored certificate read back:", d["certificate"].startswith("-----BEGIN CERTIFICATE-----"))'
fi
