CREATE TABLE `pki_crl_chunks` (
	`mount_id` text NOT NULL,
	`issuer_id` text NOT NULL,
	`kind` text NOT NULL,
	`idx` integer NOT NULL,
	`data` text NOT NULL,
	PRIMARY KEY(`mount_id`, `issuer_id`, `kind`, `idx`)
);
