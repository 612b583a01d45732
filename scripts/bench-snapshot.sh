#!/usr/bin/env bash
# Measures the storage snapshot paths (docs/operations.md "Snapshots") on a local `wrangler dev`:
# N KV versions (about 330 bytes each, sealed-looking values) are inserted straight into a fresh
# local D1, then the snapshot is saved and restored with curl; prints the wall time of each, the
# snapshot's size, and the workerd process's peak resident memory (VmHWM) after each step.
# Usage: scripts/bench-snapshot.sh [N=10000] [port=8799]
set -euo pipefail
N=${1:-10000}
PORT=${2:-8799}
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
echo "rows: $N; workerd before: $(peak)"
/usr/bin/time -f "save: %e s" curl -sS --fail-with-body -H "X-Vault-Token: $TOKEN" -o "$DIR/bench.snap" "http://127.0.0.1:$PORT/v1/sys/storage/raft/snapshot" || { head -c 400 "$DIR/bench.snap"; exit 1; }
echo "snapshot: $(stat -c %s "$DIR/bench.snap") bytes gzip, $(gunzip -c "$DIR/bench.snap" | wc -c) unpacked; workerd after save: $(peak)"
/usr/bin/time -f "restore: %e s" curl -sS --fail-with-body -X POST -H "X-Vault-Token: $TOKEN" --data-binary @"$DIR/bench.snap" "http://127.0.0.1:$PORT/v1/sys/storage/raft/snapshot"
echo "workerd after restore: $(peak)"
