CREATE TABLE `mounts` (
	`id` text PRIMARY KEY NOT NULL,
	`namespace_id` text NOT NULL,
	`path` text NOT NULL,
	`type` text NOT NULL,
	`accessor` text NOT NULL,
	`description` text NOT NULL,
	`options` text NOT NULL,
	`default_lease_ttl` integer NOT NULL,
	`max_lease_ttl` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `mounts_accessor_unique` ON `mounts` (`accessor`);--> statement-breakpoint
CREATE UNIQUE INDEX `mounts_ns_path` ON `mounts` (`namespace_id`,`path`);--> statement-breakpoint
CREATE TABLE `namespaces` (
	`id` text PRIMARY KEY NOT NULL,
	`path` text NOT NULL,
	`parent_id` text NOT NULL,
	`custom_metadata` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `namespaces_path_unique` ON `namespaces` (`path`);--> statement-breakpoint
CREATE TABLE `policies` (
	`namespace_id` text NOT NULL,
	`name` text NOT NULL,
	`text` text NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`namespace_id`, `name`)
);
--> statement-breakpoint
CREATE TABLE `tokens` (
	`hash` text PRIMARY KEY NOT NULL,
	`accessor` text NOT NULL,
	`namespace_id` text NOT NULL,
	`parent_accessor` text,
	`policies` text NOT NULL,
	`display_name` text NOT NULL,
	`meta` text,
	`num_uses` integer NOT NULL,
	`uses_left` integer NOT NULL,
	`ttl` integer NOT NULL,
	`explicit_max_ttl` integer NOT NULL,
	`renewable` integer NOT NULL,
	`creation_time` integer NOT NULL,
	`expire_time` integer,
	`max_expire_time` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tokens_accessor_unique` ON `tokens` (`accessor`);--> statement-breakpoint
CREATE INDEX `tokens_parent` ON `tokens` (`parent_accessor`);--> statement-breakpoint
CREATE INDEX `tokens_namespace` ON `tokens` (`namespace_id`);--> statement-breakpoint
CREATE TABLE `kv_config` (
	`mount_id` text PRIMARY KEY NOT NULL,
	`max_versions` integer NOT NULL,
	`cas_required` integer NOT NULL,
	`delete_version_after` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `kv_metadata` (
	`mount_id` text NOT NULL,
	`path` text NOT NULL,
	`current_version` integer NOT NULL,
	`oldest_version` integer NOT NULL,
	`max_versions` integer NOT NULL,
	`cas_required` integer NOT NULL,
	`delete_version_after` integer NOT NULL,
	`custom_metadata` text NOT NULL,
	`created_time` integer NOT NULL,
	`updated_time` integer NOT NULL,
	PRIMARY KEY(`mount_id`, `path`)
);
--> statement-breakpoint
CREATE TABLE `kv_versions` (
	`mount_id` text NOT NULL,
	`path` text NOT NULL,
	`version` integer NOT NULL,
	`sealed_data` text,
	`created_time` integer NOT NULL,
	`deletion_time` integer,
	`destroyed` integer NOT NULL,
	PRIMARY KEY(`mount_id`, `path`, `version`)
);
