-- A slim pki_certs (docs/storage-schema.md "pki_certs", docs/architecture.md "Certificate bodies"):
-- mount and issuer ids are numbered once in pki_ids and each row and index entry carries the small
-- number instead of the 36-character text; the serial is its octets as a BLOB (up to 20, RFC 5280
-- §4.1.2.2) instead of 59 characters of colon hex; the inventory indexes end at not_after and tie
-- on the row's integer id, which every index entry already carries. Rows keep their body in `der`
-- when they had one (the layout before bodies moved to R2); '' means the body is in R2.
-- The table is rebuilt (SQLite cannot change a column's type in place); the triggers of 0006 and
-- 0017 are recreated for it. unhex() is SQLite's (3.41, https://www.sqlite.org/lang_corefunc.html#unhex).
CREATE TABLE `pki_ids` (
	`no` integer PRIMARY KEY NOT NULL,
	`id` text NOT NULL
);--> statement-breakpoint
CREATE UNIQUE INDEX `pki_ids_id` ON `pki_ids` (`id`);--> statement-breakpoint
INSERT OR IGNORE INTO `pki_ids` (`id`) SELECT DISTINCT `mount_id` FROM `pki_certs`;--> statement-breakpoint
INSERT OR IGNORE INTO `pki_ids` (`id`) SELECT DISTINCT `issuer_id` FROM `pki_certs`;--> statement-breakpoint
CREATE TABLE `pki_certs_slim` (
	`id` integer PRIMARY KEY NOT NULL,
	`mount_no` integer NOT NULL,
	`serial` blob NOT NULL,
	`der` text DEFAULT '' NOT NULL,
	`issuer_no` integer NOT NULL,
	`not_after` integer NOT NULL,
	`created_at` integer NOT NULL,
	`metadata` text,
	`common_name` text,
	`sans` text,
	`not_before` integer,
	`role` text,
	`revoked_at` integer,
	`crl_shard` integer
);--> statement-breakpoint
INSERT INTO `pki_certs_slim` (`mount_no`, `serial`, `der`, `issuer_no`, `not_after`, `created_at`, `metadata`, `common_name`, `sans`, `not_before`, `role`, `revoked_at`, `crl_shard`)
SELECT (SELECT `no` FROM `pki_ids` WHERE `id` = c.`mount_id`), unhex(replace(c.`serial`, ':', '')), c.`der`, (SELECT `no` FROM `pki_ids` WHERE `id` = c.`issuer_id`),
	c.`not_after`, c.`created_at`, c.`metadata`, c.`common_name`, c.`sans`, c.`not_before`, c.`role`, c.`revoked_at`, c.`crl_shard`
FROM `pki_certs` c ORDER BY c.`created_at`, c.`rowid`;--> statement-breakpoint
DROP TRIGGER IF EXISTS `pki_certs_inv_revoked_mark`;--> statement-breakpoint
DROP TABLE `pki_certs`;--> statement-breakpoint
ALTER TABLE `pki_certs_slim` RENAME TO `pki_certs`;--> statement-breakpoint
CREATE UNIQUE INDEX `pki_certs_mount_serial` ON `pki_certs` (`mount_no`,`serial`);--> statement-breakpoint
CREATE INDEX `pki_certs_inv_not_after` ON `pki_certs` (`mount_no`,`not_after`);--> statement-breakpoint
CREATE INDEX `pki_certs_inv_role` ON `pki_certs` (`mount_no`,`role`,`not_after`);--> statement-breakpoint
CREATE INDEX `pki_certs_inv_issuer` ON `pki_certs` (`mount_no`,`issuer_no`,`not_after`);--> statement-breakpoint
CREATE INDEX `pki_certs_inv_revoked` ON `pki_certs` (`mount_no`,`not_after`) WHERE `revoked_at` IS NOT NULL;--> statement-breakpoint
CREATE INDEX `pki_certs_inv_pending` ON `pki_certs` (`mount_no`,`serial`) WHERE `not_before` IS NULL;--> statement-breakpoint
CREATE TRIGGER `pki_certs_mount_active_insert` BEFORE INSERT ON `pki_certs`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = (SELECT `id` FROM `pki_ids` WHERE `no` = NEW.`mount_no`) AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_certs_mount_active_update` BEFORE UPDATE ON `pki_certs`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = (SELECT `id` FROM `pki_ids` WHERE `no` = NEW.`mount_no`) AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_certs_inv_revoked_mark` AFTER INSERT ON `pki_revoked`
BEGIN
	UPDATE `pki_certs` SET `revoked_at` = NEW.`revocation_time`
	WHERE `mount_no` = (SELECT `no` FROM `pki_ids` WHERE `id` = NEW.`mount_id`) AND `serial` = unhex(replace(NEW.`serial`, ':', '')) AND `revoked_at` IS NULL;
END;
