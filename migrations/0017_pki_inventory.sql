ALTER TABLE `pki_certs` ADD `common_name` text;--> statement-breakpoint
ALTER TABLE `pki_certs` ADD `sans` text;--> statement-breakpoint
ALTER TABLE `pki_certs` ADD `not_before` integer;--> statement-breakpoint
ALTER TABLE `pki_certs` ADD `role` text;--> statement-breakpoint
ALTER TABLE `pki_certs` ADD `revoked_at` integer;--> statement-breakpoint
UPDATE `pki_certs` SET `revoked_at` = (SELECT r.`revocation_time` FROM `pki_revoked` r WHERE r.`mount_id` = `pki_certs`.`mount_id` AND r.`serial` = `pki_certs`.`serial`)
WHERE EXISTS (SELECT 1 FROM `pki_revoked` r WHERE r.`mount_id` = `pki_certs`.`mount_id` AND r.`serial` = `pki_certs`.`serial`)
AND EXISTS (SELECT 1 FROM `mounts` m WHERE m.`id` = `pki_certs`.`mount_id` AND m.`state` = 'active');--> statement-breakpoint
CREATE INDEX `pki_certs_inv_not_after` ON `pki_certs` (`mount_id`,`not_after`,`serial`);--> statement-breakpoint
CREATE INDEX `pki_certs_inv_role` ON `pki_certs` (`mount_id`,`role`,`not_after`,`serial`);--> statement-breakpoint
CREATE INDEX `pki_certs_inv_issuer` ON `pki_certs` (`mount_id`,`issuer_id`,`not_after`,`serial`);--> statement-breakpoint
CREATE INDEX `pki_certs_inv_revoked` ON `pki_certs` (`mount_id`,`not_after`,`serial`) WHERE `revoked_at` IS NOT NULL;--> statement-breakpoint
CREATE INDEX `pki_certs_inv_pending` ON `pki_certs` (`mount_id`,`serial`) WHERE `not_before` IS NULL;--> statement-breakpoint
CREATE TRIGGER `pki_certs_inv_revoked_mark` AFTER INSERT ON `pki_revoked`
BEGIN
	UPDATE `pki_certs` SET `revoked_at` = NEW.`revocation_time` WHERE `mount_id` = NEW.`mount_id` AND `serial` = NEW.`serial` AND `revoked_at` IS NULL;
END;--> statement-breakpoint
CREATE TABLE `pki_notify_sent` (
	`mount_id` text NOT NULL,
	`serial` text NOT NULL,
	`threshold` text NOT NULL,
	`target` text NOT NULL,
	`kind` text NOT NULL,
	`mount_path` text NOT NULL,
	`common_name` text NOT NULL,
	`not_after` integer NOT NULL,
	`state` text NOT NULL,
	`attempts` integer NOT NULL,
	`last_error` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`sent_at` integer,
	PRIMARY KEY(`mount_id`, `serial`, `threshold`, `target`)
);--> statement-breakpoint
CREATE INDEX `pki_notify_sent_pending` ON `pki_notify_sent` (`updated_at`) WHERE `state` = 'pending';--> statement-breakpoint
CREATE TABLE `pki_notify_marks` (
	`mount_id` text NOT NULL,
	`threshold` text NOT NULL,
	`not_after` integer NOT NULL,
	`serial` text NOT NULL,
	PRIMARY KEY(`mount_id`, `threshold`)
);
