CREATE TABLE `pki_crls` (
	`mount_id` text NOT NULL,
	`issuer_id` text NOT NULL,
	`kind` text NOT NULL,
	`number` integer NOT NULL,
	`der` text NOT NULL,
	`max_seq` integer NOT NULL,
	`this_update` integer NOT NULL,
	`next_update` integer NOT NULL,
	PRIMARY KEY(`mount_id`, `issuer_id`, `kind`)
);
--> statement-breakpoint
CREATE TABLE `pki_revoked` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`mount_id` text NOT NULL,
	`serial` text NOT NULL,
	`issuer_id` text NOT NULL,
	`revocation_time` integer NOT NULL,
	`not_after` integer NOT NULL,
	`der` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `pki_revoked_mount_serial` ON `pki_revoked` (`mount_id`,`serial`);--> statement-breakpoint
CREATE INDEX `pki_revoked_mount_issuer` ON `pki_revoked` (`mount_id`,`issuer_id`);--> statement-breakpoint
ALTER TABLE `pki_certs` ADD `metadata` text;