-- Sharded CRLs (docs/pki-revocation-crl.md "Sharded CRLs"): the CRL shard a certificate was assigned
-- at issuance (NULL: issued while config/crl shard_count was 1, or before sharding existed; such a
-- certificate names the full CRL), copied onto its revocation entry so a shard's build reads only its
-- own entries through the index below.
ALTER TABLE `pki_certs` ADD `crl_shard` integer;--> statement-breakpoint
ALTER TABLE `pki_revoked` ADD `crl_shard` integer;--> statement-breakpoint
CREATE INDEX `pki_revoked_mount_shard` ON `pki_revoked` (`mount_id`,`crl_shard`,`id`);
