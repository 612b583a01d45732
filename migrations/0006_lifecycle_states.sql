-- Lifecycle guards (the invariants are in src/core/lifecycle.ts).
-- Once a mount is "disabling", no row of its engine may be inserted or updated; once a namespace
-- is "deleting", nothing may be created in it. The triggers make that hold for every writer, so a
-- disable's or delete's purge, which runs after the mark, leaves nothing behind. The RAISE
-- messages are matched by src/core/lifecycle.ts and answered as 409. drizzle-kit does not model
-- triggers: a later migration that rebuilds one of these tables (its SQLite table recreation)
-- drops the table's triggers and must create them again.
-- Sync associations outlive a disabled mount on purpose (the engine still has to remove the
-- provider copies) and are updated then, so only an intent to sync is refused for them: an
-- intent to unsync a disabled mount's secret stays possible. '' is the mount id of rows written
-- before migration 0003 gave associations one.
ALTER TABLE `mounts` ADD `state` text DEFAULT 'active' NOT NULL;--> statement-breakpoint
ALTER TABLE `namespaces` ADD `state` text DEFAULT 'active' NOT NULL;--> statement-breakpoint
-- Rows orphaned by the races this migration closes (a namespace or mount deleted while something
-- was written into it): unreachable, and some hold sealed keys or secrets. Namespaces first, then
-- what lived in them, then the engine rows of mounts that are gone. Sync rows are left to the sync
-- engine, which still removes provider copies for associations of a disabled mount.
WITH RECURSIVE `live`(`id`) AS (
	SELECT `id` FROM `namespaces` WHERE `parent_id` = 'root'
	UNION SELECT `n`.`id` FROM `namespaces` `n` JOIN `live` ON `n`.`parent_id` = `live`.`id`
)
DELETE FROM `namespaces` WHERE `id` NOT IN (SELECT `id` FROM `live`);--> statement-breakpoint
DELETE FROM `mounts` WHERE `namespace_id` <> 'root' AND `namespace_id` NOT IN (SELECT `id` FROM `namespaces`);--> statement-breakpoint
DELETE FROM `policies` WHERE `namespace_id` <> 'root' AND `namespace_id` NOT IN (SELECT `id` FROM `namespaces`);--> statement-breakpoint
DELETE FROM `tokens` WHERE `namespace_id` <> 'root' AND `namespace_id` NOT IN (SELECT `id` FROM `namespaces`);--> statement-breakpoint
DELETE FROM `kv_config` WHERE `mount_id` NOT IN (SELECT `id` FROM `mounts`);--> statement-breakpoint
DELETE FROM `kv_metadata` WHERE `mount_id` NOT IN (SELECT `id` FROM `mounts`);--> statement-breakpoint
DELETE FROM `kv_versions` WHERE `mount_id` NOT IN (SELECT `id` FROM `mounts`);--> statement-breakpoint
DELETE FROM `pki_keys` WHERE `mount_id` NOT IN (SELECT `id` FROM `mounts`);--> statement-breakpoint
DELETE FROM `pki_issuers` WHERE `mount_id` NOT IN (SELECT `id` FROM `mounts`);--> statement-breakpoint
DELETE FROM `pki_config` WHERE `mount_id` NOT IN (SELECT `id` FROM `mounts`);--> statement-breakpoint
DELETE FROM `pki_roles` WHERE `mount_id` NOT IN (SELECT `id` FROM `mounts`);--> statement-breakpoint
DELETE FROM `pki_certs` WHERE `mount_id` NOT IN (SELECT `id` FROM `mounts`);--> statement-breakpoint
DELETE FROM `pki_revoked` WHERE `mount_id` NOT IN (SELECT `id` FROM `mounts`);--> statement-breakpoint
DELETE FROM `pki_crls` WHERE `mount_id` NOT IN (SELECT `id` FROM `mounts`);--> statement-breakpoint
DELETE FROM `pki_crl_chunks` WHERE `mount_id` NOT IN (SELECT `id` FROM `mounts`);--> statement-breakpoint
CREATE TRIGGER `kv_config_mount_active_insert` BEFORE INSERT ON `kv_config`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `kv_config_mount_active_update` BEFORE UPDATE ON `kv_config`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `kv_metadata_mount_active_insert` BEFORE INSERT ON `kv_metadata`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `kv_metadata_mount_active_update` BEFORE UPDATE ON `kv_metadata`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `kv_versions_mount_active_insert` BEFORE INSERT ON `kv_versions`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `kv_versions_mount_active_update` BEFORE UPDATE ON `kv_versions`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_keys_mount_active_insert` BEFORE INSERT ON `pki_keys`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_keys_mount_active_update` BEFORE UPDATE ON `pki_keys`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_issuers_mount_active_insert` BEFORE INSERT ON `pki_issuers`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_issuers_mount_active_update` BEFORE UPDATE ON `pki_issuers`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_config_mount_active_insert` BEFORE INSERT ON `pki_config`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_config_mount_active_update` BEFORE UPDATE ON `pki_config`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_roles_mount_active_insert` BEFORE INSERT ON `pki_roles`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_roles_mount_active_update` BEFORE UPDATE ON `pki_roles`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_certs_mount_active_insert` BEFORE INSERT ON `pki_certs`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_certs_mount_active_update` BEFORE UPDATE ON `pki_certs`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_revoked_mount_active_insert` BEFORE INSERT ON `pki_revoked`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_revoked_mount_active_update` BEFORE UPDATE ON `pki_revoked`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_crls_mount_active_insert` BEFORE INSERT ON `pki_crls`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_crls_mount_active_update` BEFORE UPDATE ON `pki_crls`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_crl_chunks_mount_active_insert` BEFORE INSERT ON `pki_crl_chunks`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_crl_chunks_mount_active_update` BEFORE UPDATE ON `pki_crl_chunks`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `sync_associations_mount_active_insert` BEFORE INSERT ON `sync_associations`
WHEN NEW.`desired` = 'synced' AND NEW.`mount_id` <> '' AND NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `mounts_namespace_active_insert` BEFORE INSERT ON `mounts`
WHEN NEW.`namespace_id` <> 'root' AND NOT EXISTS (SELECT 1 FROM `namespaces` WHERE `id` = NEW.`namespace_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'namespace is being deleted');
END;--> statement-breakpoint
CREATE TRIGGER `namespaces_namespace_active_insert` BEFORE INSERT ON `namespaces`
WHEN NEW.`parent_id` <> 'root' AND NOT EXISTS (SELECT 1 FROM `namespaces` WHERE `id` = NEW.`parent_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'namespace is being deleted');
END;--> statement-breakpoint
CREATE TRIGGER `policies_namespace_active_insert` BEFORE INSERT ON `policies`
WHEN NEW.`namespace_id` <> 'root' AND NOT EXISTS (SELECT 1 FROM `namespaces` WHERE `id` = NEW.`namespace_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'namespace is being deleted');
END;--> statement-breakpoint
CREATE TRIGGER `tokens_namespace_active_insert` BEFORE INSERT ON `tokens`
WHEN NEW.`namespace_id` <> 'root' AND NOT EXISTS (SELECT 1 FROM `namespaces` WHERE `id` = NEW.`namespace_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'namespace is being deleted');
END;--> statement-breakpoint
CREATE TRIGGER `sync_destinations_namespace_active_insert` BEFORE INSERT ON `sync_destinations`
WHEN NEW.`namespace_id` <> 'root' AND NOT EXISTS (SELECT 1 FROM `namespaces` WHERE `id` = NEW.`namespace_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'namespace is being deleted');
END;--> statement-breakpoint
CREATE TRIGGER `sync_repohost_apps_namespace_active_insert` BEFORE INSERT ON `sync_repohost_apps`
WHEN NEW.`namespace_id` <> 'root' AND NOT EXISTS (SELECT 1 FROM `namespaces` WHERE `id` = NEW.`namespace_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'namespace is being deleted');
END;--> statement-breakpoint
CREATE TRIGGER `sync_associations_namespace_active_insert` BEFORE INSERT ON `sync_associations`
WHEN NEW.`namespace_id` <> 'root' AND NOT EXISTS (SELECT 1 FROM `namespaces` WHERE `id` = NEW.`namespace_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'namespace is being deleted');
END;
