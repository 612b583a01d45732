ALTER TABLE `sync_associations` ADD `mount_id` text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE `sync_associations` ADD `mount_path` text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE `sync_associations` ADD `desired` text DEFAULT 'synced' NOT NULL;--> statement-breakpoint
ALTER TABLE `sync_associations` ADD `generation` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `sync_associations` ADD `done_generation` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `sync_associations` ADD `external` text DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE `sync_associations` ADD `last_error` text;--> statement-breakpoint
ALTER TABLE `sync_associations` ADD `attempts` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `sync_associations` ADD `lease_token` text;--> statement-breakpoint
ALTER TABLE `sync_associations` ADD `lease_until` integer;--> statement-breakpoint
CREATE UNIQUE INDEX `sync_associations_link` ON `sync_associations` (`namespace_id`,`destination_type`,`destination_name`,`mount_id`,`secret_name`);--> statement-breakpoint
CREATE INDEX `sync_associations_secret` ON `sync_associations` (`mount_id`,`secret_name`);--> statement-breakpoint
CREATE INDEX `sync_associations_status` ON `sync_associations` (`sync_status`);