CREATE TABLE `custom_cards` (
	`model_id` text PRIMARY KEY NOT NULL,
	`card` text NOT NULL,
	`source` text NOT NULL,
	`added_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `download_failures` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`node_id` text NOT NULL,
	`model_id` text NOT NULL,
	`error` text NOT NULL,
	`failed_at` text NOT NULL,
	`cleared_at` text,
	`cleared_reason` text
);
--> statement-breakpoint
CREATE INDEX `download_failures_open_idx` ON `download_failures` (`node_id`,`model_id`,`cleared_at`);--> statement-breakpoint
CREATE TABLE `engine_processes` (
	`pid` integer PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`instance_id` text,
	`runner_id` text,
	`port` integer,
	`command` text NOT NULL,
	`started_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `events` (
	`idx` integer PRIMARY KEY NOT NULL,
	`session` text NOT NULL,
	`type` text NOT NULL,
	`payload` text NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `events_type_idx` ON `events` (`type`);--> statement-breakpoint
CREATE TABLE `instances` (
	`id` text PRIMARY KEY NOT NULL,
	`model_id` text NOT NULL,
	`shape` text NOT NULL,
	`nodes` text NOT NULL,
	`created_at` text NOT NULL,
	`deleted_at` text,
	`outcome` text NOT NULL,
	`reason` text,
	`detail` text DEFAULT '{}' NOT NULL
);
--> statement-breakpoint
CREATE INDEX `instances_model_idx` ON `instances` (`model_id`);--> statement-breakpoint
CREATE TABLE `kv` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL,
	`updated_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `nodes` (
	`id` text PRIMARY KEY NOT NULL,
	`friendly_name` text NOT NULL,
	`version` text NOT NULL,
	`first_seen` text NOT NULL,
	`last_seen` text NOT NULL,
	`hardware` text DEFAULT '{}' NOT NULL,
	`address` text
);
--> statement-breakpoint
CREATE TABLE `resolved_model_facts` (
	`model_id` text PRIMARY KEY NOT NULL,
	`storage_bytes` integer NOT NULL,
	`gguf` text DEFAULT '{}' NOT NULL,
	`source` text NOT NULL,
	`resolved_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `telemetry_samples` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`node_id` text NOT NULL,
	`taken_at` text NOT NULL,
	`ram_used_bytes` integer,
	`ram_total_bytes` integer,
	`vram_used_bytes` integer,
	`vram_total_bytes` integer,
	`gpu_utilization` real,
	`temperature_celsius` real,
	`power_watts` real,
	`cpu_load` real,
	`disk_available_bytes` integer
);
--> statement-breakpoint
CREATE INDEX `telemetry_samples_node_time_idx` ON `telemetry_samples` (`node_id`,`taken_at`);