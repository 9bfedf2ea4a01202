CREATE TABLE `trace_spans` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`task_id` text NOT NULL,
	`node_id` text NOT NULL,
	`category` text NOT NULL,
	`name` text NOT NULL,
	`start_us` integer NOT NULL,
	`duration_us` integer NOT NULL,
	`model_id` text,
	`instance_id` text,
	`attrs` text DEFAULT '{}' NOT NULL,
	`created_at` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `trace_spans_task_idx` ON `trace_spans` (`task_id`);--> statement-breakpoint
CREATE INDEX `trace_spans_created_idx` ON `trace_spans` (`created_at`);