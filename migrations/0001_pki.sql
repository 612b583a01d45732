CREATE TABLE `pki_certs` (
	`mount_id` text NOT NULL,
	`serial` text NOT NULL,
	`der` text NOT NULL,
	`issuer_id` text NOT NULL,
	`not_after` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `pki_certs_mount_serial` ON `pki_certs` (`mount_id`,`serial`);--> statement-breakpoint
CREATE TABLE `pki_config` (
	`mount_id` text NOT NULL,
	`name` text NOT NULL,
	`value` text NOT NULL,
	PRIMARY KEY(`mount_id`, `name`)
);
--> statement-breakpoint
CREATE TABLE `pki_issuers` (
	`id` text PRIMARY KEY NOT NULL,
	`mount_id` text NOT NULL,
	`name` text NOT NULL,
	`key_id` text NOT NULL,
	`certificate` text NOT NULL,
	`serial` text NOT NULL,
	`subject_der` text NOT NULL,
	`issuer_der` text NOT NULL,
	`public_key` text NOT NULL,
	`not_after` integer NOT NULL,
	`ca_chain` text NOT NULL,
	`manual_chain` text,
	`leaf_not_after_behavior` text NOT NULL,
	`usage` text NOT NULL,
	`revocation_signature_algorithm` text NOT NULL,
	`aia` text,
	`revoked` integer NOT NULL,
	`revocation_time` integer,
	`last_modified` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `pki_issuers_mount` ON `pki_issuers` (`mount_id`);--> statement-breakpoint
CREATE TABLE `pki_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`mount_id` text NOT NULL,
	`name` text NOT NULL,
	`key_type` text NOT NULL,
	`key_bits` integer NOT NULL,
	`public_key` text NOT NULL,
	`sealed_private_key` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `pki_keys_mount` ON `pki_keys` (`mount_id`);--> statement-breakpoint
CREATE TABLE `pki_roles` (
	`mount_id` text NOT NULL,
	`name` text NOT NULL,
	`data` text NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`mount_id`, `name`)
);
