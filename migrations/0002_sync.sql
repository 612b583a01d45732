CREATE TABLE `sync_associations` (
	`id` text PRIMARY KEY NOT NULL,
	`namespace_id` text NOT NULL,
	`destination_type` text NOT NULL,
	`destination_name` text NOT NULL,
	`mount_accessor` text NOT NULL,
	`secret_name` text NOT NULL,
	`sync_status` text NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `sync_associations_destination` ON `sync_associations` (`namespace_id`,`destination_type`,`destination_name`);--> statement-breakpoint
CREATE TABLE `sync_config` (
	`id` text PRIMARY KEY NOT NULL,
	`disabled` integer NOT NULL,
	`queue_capacity` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `sync_destinations` (
	`namespace_id` text NOT NULL,
	`type` text NOT NULL,
	`name` text NOT NULL,
	`connection` text NOT NULL,
	`sealed_credentials` text NOT NULL,
	`options` text NOT NULL,
	`purge_initiated_at` integer,
	`purge_error` text,
	`version` integer NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`namespace_id`, `type`, `name`)
);
--> statement-breakpoint
CREATE INDEX `sync_destinations_purge` ON `sync_destinations` (`purge_initiated_at`);--> statement-breakpoint
CREATE TABLE `sync_repohost_apps` (
	`namespace_id` text NOT NULL,
	`name` text NOT NULL,
	`app_id` integer NOT NULL,
	`sealed_private_key` text NOT NULL,
	`fingerprint` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`namespace_id`, `name`)
);
