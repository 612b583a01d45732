#!/usr/bin/env bash
# Measures what one stored certificate costs in D1 (docs/architecture.md "Certificate bodies"):
# applies migrations/ to a fresh SQLite file (D1 is SQLite), inserts N pki_certs rows shaped like
# issued leaves (a 36-character mount id, a 20-octet serial, the inventory's columns, half EC P-256
# and half RSA-2048 leaves made by openssl with the usual extensions) and prints the bytes of the
# table and of each of its indexes per row from SQLite's dbstat virtual table
# (https://www.sqlite.org/dbstat.html), for three layouts:
#   body-in-d1  migrations up to 0018, base64 DER in the row (before bodies moved to R2)
#   body-in-r2  migrations up to 0018, der = '' (the body in R2; colon-hex serial, text ids)
#   slim        every migration (0019: pki_ids numbers, BLOB serial, indexes tied on id), der = ''
# Each figure is after VACUUM (pages packed); "as inserted" is the total before it (rows inserted
# in id order with random serials, as issuance stores them: the (mount, serial) index's pages
# are then about two thirds full).
# Runs through Python's sqlite3 module, which defines unhex() (SQLite 3.41) when the system's
# SQLite is older, so migration 0019 applies as it does in D1.
# Usage: scripts/measure-cert-rows.sh [N=20000]   (needs python3 and openssl)
set -euo pipefail
N=${1:-20000}
cd "$(dirname "$0")/.."
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
cat > "$DIR/ext.cnf" <<'CNF'
[v3]
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
subjectAltName=DNS:app-42.internal.example.com,DNS:www.app-42.internal.example.com
crlDistributionPoints=URI:https://pki.example.com/v1/pki/crl
authorityInfoAccess=caIssuers;URI:https://pki.example.com/v1/pki/ca,OCSP;URI:https://pki.example.com/v1/pki/ocsp
CNF
leaf() { # $1: key type (ec|rsa)
  if [ "$1" = ec ]; then openssl ecparam -name prime256v1 -genkey -noout -out "$DIR/$1.key"; else openssl genrsa -out "$DIR/$1.key" 2048 2> /dev/null; fi
  openssl req -x509 -new -key "$DIR/$1.key" -subj "/CN=Example Intermediate" -days 365 -out "$DIR/$1-ca.pem"
  openssl req -new -key "$DIR/$1.key" -subj "/CN=app-42.internal.example.com" -out "$DIR/$1.csr"
  openssl x509 -req -in "$DIR/$1.csr" -CA "$DIR/$1-ca.pem" -CAkey "$DIR/$1.key" -set_serial "0x$(openssl rand -hex 19)" -days 30 \
    -extfile "$DIR/ext.cnf" -extensions v3 -outform DER -out "$DIR/$1.der" 2> /dev/null
  base64 -w0 "$DIR/$1.der"
}
leaf ec > "$DIR/ec.b64"
leaf rsa > "$DIR/rsa.b64"
echo "leaf DER: EC $(stat -c %s "$DIR/ec.der") bytes, RSA $(stat -c %s "$DIR/rsa.der") bytes"
python3 - "$N" "$DIR" <<'PY'
import glob, sqlite3, sys
n, tmp = int(sys.argv[1]), sys.argv[2]
ec, rsa = open(f"{tmp}/ec.b64").read(), open(f"{tmp}/rsa.b64").read()
MOUNT, ISSUER = "0f3c9a52-6a1e-4a59-9d5e-1b2c3d4e5f60", "7d1e2f30-4b5c-4d6e-8f70-8192a3b4c5d6"
# The leaf's values; i numbers the row. The serial is 20 random octets (hex: 40 digits).
VALUES = """FROM (SELECT i, hex(randomblob(20)) AS s FROM n)"""
ROWS = f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n})"
FACTS = """1780000000 + i, 1777000000000 + i, NULL, 'app-' || i || '.internal.example.com',
  'app-' || i || '.internal.example.com' || char(10) || 'www.app-' || i || '.internal.example.com', 1777000000 + i, 'web-server', NULL"""
COLON = "lower(" + "||':'||".join(f"substr(s,{k},2)" for k in range(1, 41, 2)) + ")"
OLD = f"""{ROWS} INSERT INTO pki_certs (mount_id, serial, der, issuer_id, not_after, created_at, metadata, common_name, sans, not_before, role, revoked_at)
SELECT '{MOUNT}', {COLON}, {{der}}, '{ISSUER}', {FACTS} {VALUES}"""
SLIM = f"""INSERT OR IGNORE INTO pki_ids (id) VALUES ('{MOUNT}'), ('{ISSUER}');
{ROWS} INSERT INTO pki_certs (mount_no, serial, der, issuer_no, not_after, created_at, metadata, common_name, sans, not_before, role, revoked_at)
SELECT (SELECT no FROM pki_ids WHERE id = '{MOUNT}'), unhex(s), '', (SELECT no FROM pki_ids WHERE id = '{ISSUER}'), {FACTS} {VALUES};"""
STAT = "SELECT name, sum(pgsize) FROM dbstat WHERE name = 'pki_certs' OR name LIKE 'pki_certs_%' GROUP BY name ORDER BY name"

def measure(label, migrations, insert):
    db = sqlite3.connect(f"{tmp}/{label}.sqlite", isolation_level=None)
    if sqlite3.sqlite_version_info < (3, 41, 0):
        db.create_function("unhex", 1, lambda h: None if h is None else bytes.fromhex(h), deterministic=True)
    for m in migrations:
        db.executescript(open(m).read().replace("--> statement-breakpoint", ""))
    db.execute("""INSERT INTO mounts (id, namespace_id, path, type, accessor, description, options, default_lease_ttl, max_lease_ttl, created_at)
      VALUES (?, 'root', 'pki/', 'pki', 'pki_0f3c9a52', '', '{}', 0, 0, 0)""", (MOUNT,))
    db.executescript(insert)
    inserted = sum(b for _, b in db.execute(STAT))
    db.execute("VACUUM")
    rows = list(db.execute(STAT))
    total = sum(b for _, b in rows)
    print(f"== {label} ({n} rows)")
    for name, b in rows:
        print(f"{name:28} {b:>12} {b / n:>8.0f}")
    print(f"{'total':28} {total:>12} {total / n:>8.0f}   (as inserted, before VACUUM: {inserted / n:.0f})")
    db.close()

all_migrations = sorted(glob.glob("migrations/*.sql"))
before_slim = [m for m in all_migrations if m.split("/")[-1] < "0019"]
measure("body-in-d1", before_slim, OLD.format(der=f"CASE WHEN i % 2 = 0 THEN '{ec}' ELSE '{rsa}' END"))
measure("body-in-r2", before_slim, OLD.format(der="''"))
measure("slim", all_migrations, SLIM)
PY
