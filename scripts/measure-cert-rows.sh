#!/usr/bin/env bash
# Measures what one stored certificate costs in D1 (docs/architecture.md "Certificate bodies"):
# applies migrations/ to a fresh SQLite file (D1 is SQLite), inserts N pki_certs rows shaped like
# issued leaves (a 36-character mount id, a 20-octet colon-hex serial, the inventory's columns,
# half EC P-256 and half RSA-2048 leaves made by openssl with the usual extensions), once with the
# body in the row (base64 DER, the layout before certificate bodies moved to R2) and once with
# der = '' (the body in R2), and prints the bytes of the table and of each of its indexes per
# row from SQLite's dbstat virtual table (https://www.sqlite.org/dbstat.html).
# Usage: scripts/measure-cert-rows.sh [N=20000]   (needs sqlite3 and openssl)
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
EC=$(leaf ec)
RSA=$(leaf rsa)
echo "leaf DER: EC $(stat -c %s "$DIR/ec.der") bytes, RSA $(stat -c %s "$DIR/rsa.der") bytes"
measure() { # $1: label, $2: SQL expression of the der column
  local db="$DIR/$1.sqlite"
  cat migrations/*.sql | sqlite3 "$db"
  sqlite3 "$db" > /dev/null <<SQL
INSERT INTO mounts (id, namespace_id, path, type, accessor, description, options, default_lease_ttl, max_lease_ttl, created_at)
  VALUES ('0f3c9a52-6a1e-4a59-9d5e-1b2c3d4e5f60', 'root', 'pki/', 'pki', 'pki_0f3c9a52', '', '{}', 0, 0, 0);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $N)
INSERT INTO pki_certs (mount_id, serial, der, issuer_id, not_after, created_at, metadata, common_name, sans, not_before, role, revoked_at)
SELECT '0f3c9a52-6a1e-4a59-9d5e-1b2c3d4e5f60',
  lower(substr(s,1,2)||':'||substr(s,3,2)||':'||substr(s,5,2)||':'||substr(s,7,2)||':'||substr(s,9,2)||':'||substr(s,11,2)||':'||substr(s,13,2)||':'||substr(s,15,2)||':'||substr(s,17,2)||':'||substr(s,19,2)||':'||
        substr(s,21,2)||':'||substr(s,23,2)||':'||substr(s,25,2)||':'||substr(s,27,2)||':'||substr(s,29,2)||':'||substr(s,31,2)||':'||substr(s,33,2)||':'||substr(s,35,2)||':'||substr(s,37,2)||':'||substr(s,39,2)),
  $2, '7d1e2f30-4b5c-4d6e-8f70-8192a3b4c5d6', 1780000000 + i, 1777000000000 + i, NULL,
  'app-' || i || '.internal.example.com', 'app-' || i || '.internal.example.com' || char(10) || 'www.app-' || i || '.internal.example.com',
  1777000000 + i, 'web-server', NULL
FROM (SELECT i, hex(randomblob(20)) AS s FROM n);
VACUUM;
SQL
  echo "== $1 ($N rows)"
  sqlite3 "$db" "SELECT name, sum(pgsize) AS bytes, printf('%.0f', sum(pgsize) * 1.0 / $N) AS per_row FROM dbstat WHERE name = 'pki_certs' OR name LIKE 'pki_certs_%' GROUP BY name UNION ALL SELECT 'total', sum(pgsize), printf('%.0f', sum(pgsize) * 1.0 / $N) FROM dbstat WHERE name = 'pki_certs' OR name LIKE 'pki_certs_%'" -column
}
measure body-in-d1 "CASE WHEN i % 2 = 0 THEN '$EC' ELSE '$RSA' END"
measure body-in-r2 "''"
