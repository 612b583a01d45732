-- ACME renewal information (RFC 9773), profiles (draft-aaron-acme-profiles) and patient
-- validation (docs/pki-acme.md): an order's profile and the certificate it replaces (one
-- replacing order per certificate: the partial unique index), a challenge's attempt count, and
-- the operator's early-renewal marks of an issuer or a role; and the RFC 5280 §5.3.1 reason
-- of a revocation (0: unspecified, the CRL entry then has no reasonCode).
ALTER TABLE `pki_revoked` ADD `reason` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `pki_acme_orders` ADD `profile` text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE `pki_acme_orders` ADD `replaces` text DEFAULT '' NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX `pki_acme_orders_replaces` ON `pki_acme_orders` (`mount_id`,`replaces`) WHERE `replaces` <> '';--> statement-breakpoint
ALTER TABLE `pki_acme_challenges` ADD `attempts` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE TABLE `pki_acme_renewal_marks` (
	`mount_id` text NOT NULL,
	`kind` text NOT NULL,
	`ref` text NOT NULL,
	`explanation_url` text NOT NULL,
	`marked_at` integer NOT NULL,
	PRIMARY KEY(`mount_id`, `kind`, `ref`)
);--> statement-breakpoint
CREATE TRIGGER `pki_acme_renewal_marks_mount_active_insert` BEFORE INSERT ON `pki_acme_renewal_marks`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;--> statement-breakpoint
CREATE TRIGGER `pki_acme_renewal_marks_mount_active_update` BEFORE UPDATE ON `pki_acme_renewal_marks`
WHEN NOT EXISTS (SELECT 1 FROM `mounts` WHERE `id` = NEW.`mount_id` AND `state` = 'active')
BEGIN
	SELECT RAISE(ABORT, 'mount is being disabled');
END;
