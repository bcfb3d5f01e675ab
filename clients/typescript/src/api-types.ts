// Owns the API's types: generated from crates/redial-server/src/openapi.json by
// scripts/generate-types.mjs (openapi-typescript). Do not edit; run `npm run generate-types`.

export interface paths {
    "/v1/jobs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List jobs, oldest first, with cursor pagination */
        get: operations["listJobs"];
        put?: never;
        /** Enqueue one job */
        post: operations["enqueueJob"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/batch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Enqueue a batch atomically: all stored, or none when one conflicts */
        post: operations["enqueueBatch"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A job with its attempt log; with wait, once it has finished
         * @description With wait (a duration of at most 60 s, such as 30s), the answer comes once the job is completed, dead or cancelled, or when the wait ends, with the job as it stands then: woken by the change on the node that made it, and within 2 s for a change another node made. At most server.max_waiters requests wait at once; more are answered 503 too_many_waiters with Retry-After. 400 invalid_wait for a wait that is not a duration of at most 60 s.
         */
        get: operations["getJob"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/{id}/replay": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Replay a dead job: back to ready, counters reset, history kept; the same idempotency key unless renewed; with a patch, its request or routing changed (or only previewed with dry_run) */
        post: operations["replayJob"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/{id}/dismiss": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Dismiss a dead job: it and its attempts are deleted */
        post: operations["dismissJob"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/jobs/{id}/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Cancel a job that has not finished (a running one ends cancelled when its attempt returns) */
        post: operations["cancelJob"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/dead-letters/replay": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Replay every dead job matching the filter (a chunk of at most 1,000 jobs at a time, one transaction each; with wait: false, answered at once with the operation) */
        post: operations["replayDeadLetters"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/dead-letters/dismiss": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Dismiss (delete) every dead job matching the filter (a chunk of at most 1,000 jobs at a time, one transaction each; with wait: false, answered at once with the operation) */
        post: operations["dismissDeadLetters"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/dead-letters/export": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Every dead letter the filter matches (an empty body: every one), one JSON object a line: the job as POST /v1/jobs takes it, with its request as sent (secrets included: a read-only token may not), and under dead its category, reason, times, counts and attempts. redial enqueue --file takes the lines back. */
        post: operations["exportDeadLetters"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/stats": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Counts per queue x state (x category for dead jobs), and per endpoint x state */
        get: operations["stats"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/endpoints": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A page of endpoints by name, each with its protection state and backlog */
        get: operations["listEndpoints"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/endpoints/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One endpoint */
        get: operations["getEndpoint"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/alerts": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Every alert rule's state: firing or not, since when, the value measured and the threshold */
        get: operations["alerts"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/backup": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * A consistent copy of the embedded SQLite database, made while jobs run
         * @description Copies the database as of one commit (SQLite's VACUUM INTO on a connection of its own: writers go on), fsyncs and checks the copy (quick_check), then sends it: a SQLite file that `redial serve --data-dir DIR` starts on once saved as DIR/redial.db. The copy is made beside the database first (its disk needs room for it: a backup is refused with 503 storage_unavailable when the disk has less free space than the database's size and 64 MiB) and removed once sent. One backup at a time on a node: another, while one is made or sent, is answered 503 backup_in_progress with Retry-After. `redial backup FILE` calls this, writes FILE under a temporary name, checks it again and renames it. The copy holds every job's request, credentials included: keep it as safe as the database. A PostgreSQL-backed server answers 501 not_supported: back that database up with pg_dump or the provider's backups.
         */
        post: operations["backup"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This document */
        get: operations["openapi"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Metrics in the Prometheus text format 0.0.4 (requires the token like the API) */
        get: operations["metrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Liveness: the process answers */
        get: operations["healthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Readiness: the store answers */
        get: operations["readyz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/dead-letters/groups": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Dead letters grouped by queue, category and endpoint, largest group first (each group is what a bulk replay or dismiss with that filter acts on) */
        get: operations["deadLetterGroups"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/dead-letters/patterns": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Dead letters grouped by the pattern of their reason (one cause, whatever the numbers, ids and times in its text), largest first; a pattern is a filter for the groups, the job list and the bulk actions */
        get: operations["deadLetterPatterns"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/operations": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This node's bulk operations, newest first: those running and the last 100 finished */
        get: operations["listOperations"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/operations/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A bulk operation's progress: done of total, its state */
        get: operations["getOperation"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/operations/{id}/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Stops a running bulk operation before its next chunk (the chunk under way commits); 409 invalid_state once it has finished */
        post: operations["cancelOperation"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/session": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** What the caller may do: whether its token is the read-only one */
        get: operations["session"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/endpoints/{name}/pause": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Pause an endpoint by hand: every job of it is held, on every node, until resumed or until the given end */
        post: operations["pauseEndpoint"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/endpoints/{name}/resume": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Resume an endpoint: lifts the hand pause and ends a pause its answers set (a server-given wait, a spent quota); the next answer may pause it again */
        post: operations["resumeEndpoint"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/endpoints/{name}/reset-breaker": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Close an endpoint's circuit breaker by hand, with an empty window and its open time back to the first step, on every node */
        post: operations["resetEndpointBreaker"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/queues": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The configured queues and their hand pauses */
        get: operations["listQueues"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/queues/{name}/groups": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A queue's groups (tenants) with work, most waiting first, with their limits
         * @description Counts every grouped job of the queue that is waiting or running: an on-demand view.
         */
        get: operations["queueGroups"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/queues/{name}/ordering-keys": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A queue's ordering keys: each key's head, the jobs behind it, and why it waits
         * @description One head per key, in an order of the listing's own (each line's number: stable from page to page); `blocked=true` lists only the keys whose head is dead (with `ordering_on_dead` = block they wait for it to be replayed or dismissed). Each line is counted: an on-demand view.
         */
        get: operations["queueOrderingKeys"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/queues/{name}/pause": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Pause a queue by hand: none of its jobs is leased (those running finish) until resumed or until the given end */
        post: operations["pauseQueue"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/queues/{name}/resume": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Resume a queue paused by hand */
        post: operations["resumeQueue"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/series": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** This node's last hour, minute by minute: attempts by category, jobs finished, attempt latency (kept in the process; each node its own) */
        get: operations["getSeries"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/schedules": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A page of schedules, by id */
        get: operations["listSchedules"];
        put?: never;
        /** Create a recurring schedule; each occurrence becomes an ordinary job */
        post: operations["createSchedule"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/schedules/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One schedule */
        get: operations["getSchedule"];
        /** Create or replace the schedule of this id (a replaced one keeps its pause; its next occurrence is the first after now) */
        put: operations["putSchedule"];
        post?: never;
        /** Delete a schedule; the jobs it enqueued stay */
        delete: operations["deleteSchedule"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/schedules/{id}/pause": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Pause a schedule: none of its occurrences is enqueued until resumed */
        post: operations["pauseSchedule"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/schedules/{id}/resume": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Resume a schedule from its next occurrence after now (those that fell while paused are not run) */
        post: operations["resumeSchedule"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The event log from a cursor: jobs completed, dead, cancelled and replayed; endpoints paused and resumed, breakers opened and closed
         * @description Kept for retention.events (24 h by default). Events come in the log's order; each has an id, a cursor to read on from. A page reads at most 20 times limit rows: with filters that leave most out it may hold fewer than limit events with more true; next_cursor moves past the rows read either way. Read on with after=next_cursor.
         */
        get: operations["listEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/events/stream": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The event log as Server-Sent Events, live
         * @description Each event is sent as `id: <cursor>`, `event: <type>`, `data: <the Event as JSON>`; a comment line every 15 s keeps a quiet stream alive. Starts after Last-Event-ID (a reconnecting client sends it) or after, else from now on; a client that reconnects with the last id it saw misses nothing and gets nothing twice (while the events it missed are kept). At most server.max_waiters streams at once: more are answered 503 too_many_waiters. The stream ends when the server stops.
         */
        get: operations["streamEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/endpoints/{name}/replay-outage": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Replay, in one action, the endpoint's dead letters that died since its last outage began */
        post: operations["replayEndpointOutage"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** @description Every error answer, whatever its status. */
        Error: {
            error: {
                /**
                 * @description Machine-readable; stable. Clients match on it; the message is for people.
                 * @enum {string}
                 */
                code: "backup_in_progress" | "bad_request" | "batch_too_large" | "body_too_large" | "busy" | "conflict" | "cross_site" | "empty_batch" | "filter_required" | "foreign_host" | "headers_too_large" | "internal" | "invalid_body" | "invalid_callback" | "invalid_category" | "invalid_cursor" | "invalid_deadline" | "invalid_endpoint" | "invalid_event_kind" | "invalid_field" | "invalid_group" | "invalid_header" | "invalid_id" | "invalid_idempotency_key" | "invalid_job" | "invalid_json" | "invalid_limit" | "invalid_method" | "invalid_missed" | "invalid_ordering_key" | "invalid_parameter" | "invalid_pattern" | "invalid_pause" | "invalid_policy" | "invalid_range" | "invalid_reason" | "invalid_reason_text" | "invalid_schedule" | "invalid_state" | "invalid_tags" | "invalid_time" | "invalid_timeout" | "invalid_url" | "invalid_wait" | "job_body_too_large" | "method_not_allowed" | "no_route" | "not_found" | "not_supported" | "read_only" | "request_timeout" | "reserved_queue" | "schedule_exists" | "storage_unavailable" | "too_large" | "too_many_waiters" | "unauthorized" | "unknown_parameter" | "unknown_queue" | "unsupported_media_type" | "uri_too_long";
                /** @description What was wrong and what to do, for people. */
                message: string;
            };
        };
        JobInput: {
            /** @description Client-given id (1-200 of letters, digits, - _ . : @); generated (a UUID) when absent. Enqueuing an existing id with the same request returns the existing job (200, deduplicated); with a different request, 409. */
            id?: string;
            /**
             * @description A configured queue; another name is refused (422 unknown_queue).
             * @default default
             */
            queue?: string;
            request: {
                /** @description A standard method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT) in any case, sent in upper case; or another HTTP token in upper case, sent as written. */
                method: string;
                /**
                 * Format: uri
                 * @description An http or https URL with a host and a port other than 0, at most 8192 bytes.
                 */
                url: string;
                /** @description At most 100. Names are HTTP tokens, values at most 8192 bytes without control characters. Framing and hop-by-hop headers (Content-Length, Transfer-Encoding, Host, Connection, TE, Trailer, Upgrade, Keep-Alive, Proxy-*) are refused: the HTTP client sets them. */
                headers?: {
                    [key: string]: string;
                } | [
                    string,
                    string
                ][];
                /** @description A string is sent as is; any other JSON value is sent as JSON (content-type application/json unless given). null or absent: no body. At most server.max_job_body_bytes (413 job_body_too_large). */
                body?: unknown;
                /** @description The attempt's time limit: a duration with a unit, 1ms to 10m, e.g. "10s"; the server's default when absent. */
                timeout?: string;
                /** @description A credentials profile of the server's configuration ([credentials.NAME]) to send the request with, instead of its endpoint's credentials (another account at the same API, a tenant's own key). Unknown names are refused (422 invalid_field). The job stores the name only, never a secret. */
                credentials?: string;
            };
            /** @description Sent on every attempt (1-255 printable ASCII characters, no spaces); derived from queue and id (UUIDv5) when absent. */
            idempotency_key?: string;
            /**
             * Format: date-time
             * @description Not before this instant (RFC 3339); now when absent or past.
             */
            run_at?: string;
            /**
             * Format: date-time
             * @description Give up (dead, deadline_exceeded) after this instant; it must be in the future and after run_at.
             */
            deadline?: string;
            /**
             * @description Higher runs first within a queue.
             * @default 0
             */
            priority?: number;
            /** @description At most 32 tags of 1 to 100 characters of plain text each, not only spaces: no control characters, bidirectional overrides or line separators (422 invalid_tags). */
            tags?: string[];
            /** @description Who the job is for (a tenant, a customer id). Within a queue, leasing goes round-robin across the groups with due work (jobs without a group take their turn as one group), and a queue may limit each group's concurrency and rate. 1 to 128 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators (422 invalid_group). */
            group?: string;
            /** @description Jobs of the queue with the same ordering key start one at a time, in the order they were enqueued (priority does not reorder them): a retry, a deferral or a hold of the key's head holds the key; a dead head holds it until it is replayed or dismissed (the queue's `ordering_on_dead` = block, the default) or lets the next go (skip); a replayed job takes its original place. Keys and groups combine. 1 to 256 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators (422 invalid_ordering_key). */
            ordering_key?: string;
            /** @description Endpoint grouping: 1 to 200 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators (422 invalid_endpoint); the URL's origin by default. Every endpoint control takes the same names. */
            endpoint?: string;
            /** @description Overrides of the queue's retry policy (the fields of a policy file: max_attempts, max_unknown_attempts, max_deferrals, max_age, max_server_wait, server_wait_jitter, trust_provider_hints, defer_with_server_wait, transient, unknown, safe_repeat_transient_backoff, deferral, rules). An unknown field or an invalid value is refused (422 invalid_policy or invalid_field). */
            policy?: Record<string, never> | null;
            callback?: components["schemas"]["CallbackInput"];
        };
        Job: {
            id: string;
            queue: string;
            endpoint: string;
            /** @enum {string} */
            state: "scheduled" | "ready" | "running" | "deferred" | "completed" | "dead" | "cancelled";
            /**
             * @description The dead-letter category, for dead jobs.
             * @enum {string|null}
             */
            category: "permanent" | "transient_exhausted" | "unknown_exhausted" | "deferral_exhausted" | "deadline_exceeded" | "budget_exhausted" | null;
            /** @description Failed attempts (transient and unknown) since creation or the last replay. */
            attempts: number;
            unknown_attempts: number;
            deferrals: number;
            /** @description Times its lease expired mid-attempt. */
            stalls: number;
            replays: number;
            /** @description Every attempt made, across replays: the attempt log's length. */
            runs: number;
            priority: number;
            /** Format: date-time */
            run_at: string;
            /** Format: date-time */
            deadline: string | null;
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            updated_at: string;
            /** Format: date-time */
            finished_at: string | null;
            idempotency_key: string | null;
            tags: string[];
            /** @description Who the job is for; null when it has no group. */
            group: string | null;
            /** @description Its ordering key (the queue's jobs with this key start one at a time, in enqueue order); null when it has none. */
            ordering_key: string | null;
            last_reason: string | null;
            cancel_requested: boolean;
            request: components["schemas"]["RequestView"];
            /** @description On enqueue answers only: whether the job already existed. */
            deduplicated?: boolean;
            /** @description On GET /v1/jobs/{id} only. */
            attempt_log?: components["schemas"]["Attempt"][];
            /** @description Where the job tells when it finishes; null when it has no callback. */
            callback: components["schemas"]["CallbackView"] | null;
            /** @description The id of the delivery its finish made (a job of the callback queue), when its callback is for the state it finished in. */
            callback_delivery: string | null;
            /** @description For a delivery: the id of the job it tells about. */
            callback_for: string | null;
            /** @description What replays with changes did, oldest first (with the attempt log, when any) */
            changes?: components["schemas"]["JobChange"][];
            /** @description The request as enqueued, when a replay changed it (with the attempt log) */
            original_request?: components["schemas"]["RequestView"];
        };
        /** @description The request the job sends. Secrets in headers and URL query values are redacted; the body is not shown, only its size. */
        RequestView: {
            method: string;
            url: string;
            headers: string[][];
            body_bytes: number;
            timeout_ms: number | null;
            /** @description The credentials profile it is sent with ([credentials.NAME] in the configuration), instead of its endpoint's; null when it names none. A name, never a secret. */
            credentials: string | null;
        };
        Attempt: {
            /** @description 1 for the job's first attempt, counting across replays. */
            number: number;
            /** Format: date-time */
            started_at: string;
            duration_ms: number;
            /** @description The HTTP status, when a response arrived. */
            status: number | null;
            /** @description The transport error kind (read-timeout...) or a handler's failure, when no response arrived. */
            error: string | null;
            error_detail?: string;
            /** @description The outcome's category: success, defer, transient, permanent, unknown (held: not sent). */
            category: string;
            /** @description complete, retry, defer, dead or cancelled. */
            decision: string;
            /** @enum {string|null} */
            dead_category: "permanent" | "transient_exhausted" | "unknown_exhausted" | "deferral_exhausted" | "deadline_exceeded" | "budget_exhausted" | null;
            delay_ms: number | null;
            server_wait_ms: number | null;
            server_wait_source: string | null;
            reason: string;
            /** @description What held the job before this attempt, if anything. */
            held?: string;
            response_headers: string[][];
            /** @description Text, or base64 when the body is not UTF-8 (response_body_base64). */
            response_body: string | null;
            worker: string;
            /** @description Present and true when response_body is the body's bytes in base64. */
            response_body_base64?: boolean;
            /** @description Present and true when the body was cut at the bound. */
            response_body_truncated?: boolean;
        };
        JobPage: {
            jobs: components["schemas"]["Job"][];
            /** @description Pass as cursor for the next page; null on the last one. */
            next_cursor: string | null;
        };
        BatchInput: {
            /** @description 1 to server.max_batch (1000 by default) jobs; more is refused (413 batch_too_large), none too (422 empty_batch). */
            jobs: components["schemas"]["JobInput"][];
        };
        BatchResult: {
            inserted: number;
            deduplicated: number;
            /** @description In the order sent, each with deduplicated. */
            jobs: components["schemas"]["Job"][];
        };
        Dismissed: {
            id: string;
            /** @constant */
            dismissed: true;
        };
        Affected: {
            affected: number;
            /** @description With changes: the dead letters the filter matched */
            matched?: number;
            /** @description With changes: those not replayed (the patch is not for them, or they changed since they were read) */
            skipped?: number;
            /** @description Without changes: the operation that did it (GET /v1/operations/{id}) */
            operation?: string;
            /**
             * @description Without changes: how the operation ended (cancelled: affected says how many before)
             * @enum {string}
             */
            state?: "running" | "done" | "cancelled" | "failed";
        };
        /** @description Which dead letters. Every field given must match. A body with no criterion (or an empty body) is refused (422 filter_required) unless it says {"all": true}. */
        DeadLetterFilter: {
            /** @description A configured queue (422 unknown_queue otherwise). */
            queue?: string;
            /** @enum {string} */
            category?: "permanent" | "transient_exhausted" | "unknown_exhausted" | "deferral_exhausted" | "deadline_exceeded" | "budget_exhausted";
            endpoint?: string;
            /**
             * Format: date-time
             * @description created at or after
             */
            since?: string;
            /**
             * Format: date-time
             * @description created before; not before since (422 invalid_range)
             */
            until?: string;
            /** @description A reason pattern as GET /v1/dead-letters/patterns gives it: the dead letters whose reason has it when the action starts (422 invalid_pattern when it is not one line of plain text of at most 1,000 characters). */
            pattern?: string;
            /** @description true to act on every dead letter. */
            all?: boolean;
            /** @description Replay only: the changes, applied job by job (each job its own transaction; a job replayed meanwhile is skipped) */
            patch?: components["schemas"]["ReplayPatch"];
            /**
             * @description Replay only: keep (the default) or renew the idempotency keys
             * @enum {string}
             */
            key?: "keep" | "renew";
            /** @description Replay only: answer what would change (ReplayPreview) and change nothing */
            dry_run?: boolean;
            /** @description false: answer at once (202) with the operation, to follow at GET /v1/operations/{id}; true (the default): answer when it has finished. Not with a patch. */
            wait?: boolean;
        } | unknown | unknown | unknown | unknown | unknown | unknown | {
            /** @constant */
            all: true;
        };
        Stats: {
            queues: {
                queue: string;
                /** @enum {string} */
                state: "scheduled" | "ready" | "running" | "deferred" | "completed" | "dead" | "cancelled";
                /**
                 * @description For dead jobs.
                 * @enum {string}
                 */
                category?: "permanent" | "transient_exhausted" | "unknown_exhausted" | "deferral_exhausted" | "deadline_exceeded" | "budget_exhausted";
                count: number;
            }[];
            endpoints: {
                endpoint: string;
                /** @enum {string} */
                state: "scheduled" | "ready" | "running" | "deferred" | "completed" | "dead" | "cancelled";
                count: number;
            }[];
        };
        /** @description An endpoint's protection state: what holds its jobs now, the shared pause, configured and learned limits, in-flight attempts, retry budget, circuit breaker and its history, and its backlog. */
        Endpoint: {
            name: string;
            /** @description What holds its jobs right now, if anything. */
            holding: string | null;
            /** @description A pause set by hand, while in force: every job of the endpoint is held, on every node. */
            paused_by_hand: components["schemas"]["HandPause"] | null;
            /**
             * Format: date-time
             * @description The end of a pause the endpoint's own answers set (a server-given wait such as Retry-After, a spent quota's reset), shared by every node; a pause set by hand is paused_by_hand.
             */
            paused_until: string | null;
            /** @description Why the endpoint's answers paused it (while paused_until is in force). */
            pause_reason: string | null;
            /** @description Configured rate, e.g. "10/s". */
            rate: string | null;
            burst: number;
            /** @description The nodes sharing the store, among which the endpoint's limits are divided (1 alone). With several, concurrency_limit, learned_remaining and the retry budget are this node's part, and in_flight is this node's; rate and burst are the cluster's. */
            nodes: number;
            learned_limit: number | null;
            learned_remaining: number | null;
            /** Format: date-time */
            learned_reset_at: string | null;
            /** @description Requests per second this node sends the endpoint, learned from refusals that said nothing (429s with no wait and no quota, a limiter's bare 503s, whole-second waits the endpoint rounds up): a cut on each, growth with each success; null when it refused nothing of the kind for 10 s. */
            learned_pace: number | null;
            concurrency_limit: number | null;
            in_flight: number;
            /** Format: date-time */
            slow_start_since: string | null;
            budget_allowed: number;
            budget_used: number;
            budget_remaining: number;
            /** @enum {string} */
            breaker: "closed" | "open" | "half_open";
            /** Format: date-time */
            breaker_until: string | null;
            /** @description failures (first attempts and retries) in the breaker's window */
            breaker_window_failures: number;
            /** @description of those, failures of retries: what opens the breaker */
            breaker_window_retry_failures: number;
            breaker_window_calls: number;
            breaker_history: {
                /** Format: date-time */
                at: string;
                to: string;
                reason: string;
            }[];
            /** @description jobs due now but held by the endpoint's limits */
            held: number;
            /** @description jobs scheduled ahead */
            waiting_later: number;
            /**
             * Format: date-time
             * @description Since when the endpoint is quarantined: its breaker stayed open with probes failing for breaker.quarantine_after (15 min); its jobs are held, not failed, and one probe goes every breaker.quarantine_probe_every (1 min). Null when it is not.
             */
            quarantined_since: string | null;
            /**
             * Format: date-time
             * @description Since when the endpoint has been failing (its first failure after its last success); null when its last answer was a success.
             */
            failing_since: string | null;
            /**
             * Format: date-time
             * @description When its last outage began (kept after it ended): POST /v1/endpoints/{name}/replay-outage replays the dead letters since then.
             */
            outage_began: string | null;
            /** @description Only in GET /v1/endpoints/{name} and in the answers of its controls, not in the list. */
            forecast?: components["schemas"]["Forecast"];
            /** @description Present when the endpoint has credentials of its own ([endpoints.*.auth] in the configuration): which kind, where its secret comes from, and for OAuth2 the token's state. Never a secret. */
            credentials?: components["schemas"]["EndpointCredentials"];
        };
        EndpointList: {
            endpoints: components["schemas"]["Endpoint"][];
            /** @description Pass as cursor for the next page; null on the last one. */
            next_cursor: string | null;
        };
        Alert: {
            name: string;
            rule: string;
            firing: boolean;
            /**
             * Format: date-time
             * @description Since when it fires (or, when it does not, since when it stopped), if it ever fired.
             */
            since: string | null;
            /** @description What was measured: a count of dead letters, a deferral's age in seconds, or a count of waiting jobs forecast to miss their deadline. */
            value: number | null;
            threshold: number | null;
            /** Format: date-time */
            evaluated_at: string | null;
            summary: string;
        };
        AlertList: {
            alerts: components["schemas"]["Alert"][];
        };
        Health: {
            /** @enum {string} */
            status: "ok";
        };
        Ready: {
            /** @enum {string} */
            status: "ready";
        };
        NotReady: {
            /** @enum {string} */
            status: "unavailable";
            reason: string;
        };
        DeadGroup: {
            queue: string;
            /** @enum {string} */
            category: "permanent" | "transient_exhausted" | "unknown_exhausted" | "deferral_exhausted" | "deadline_exceeded" | "budget_exhausted";
            endpoint: string;
            count: number;
            /**
             * Format: date-time
             * @description When the first of them went dead
             */
            first: string;
            /**
             * Format: date-time
             * @description When the last of them went dead
             */
            last: string;
            /** @description The reason line of one of them */
            reason?: string | null;
        };
        DeadGroups: {
            groups: components["schemas"]["DeadGroup"][];
            total: number;
        };
        Session: {
            /** @description The request's token is the read-only one */
            read_only: boolean;
            token_required: boolean;
        };
        /** @description A pause set by hand: since when, until when (null: until resumed) and why. */
        HandPause: {
            /** Format: date-time */
            since: string;
            /**
             * Format: date-time
             * @description When it ends by itself; null: when resumed.
             */
            until: string | null;
            reason: string;
        };
        /** @description Why, and until when: an instant (until) or a duration from now (for), not both; with neither, until resumed. The body may be empty. */
        PauseInput: {
            /**
             * @description One line of plain text: control characters (newlines, escapes, NUL), bidirectional overrides and line separators are refused (422 invalid_reason).
             * @example provider maintenance
             */
            reason?: string;
            /** Format: date-time */
            until?: string;
            /**
             * @description A duration with a unit, up to 366d
             * @example 30m
             */
            for?: string;
        };
        /** @description A configured queue and its hand pause. */
        Queue: {
            name: string;
            concurrency: number;
            /** @description While in force, none of its jobs is leased (those running finish). */
            paused_by_hand: components["schemas"]["HandPause"] | null;
            /** @description What each group of the queue's jobs may use: `each` for every group, `named` for groups configured by name. */
            groups: {
                each: components["schemas"]["GroupLimits"];
                named: {
                    [key: string]: components["schemas"]["GroupLimits"];
                };
            };
            /**
             * @description What a dead job does to its ordering key: block (the key waits until the job is replayed or dismissed) or skip (the next job of the key goes on).
             * @enum {string}
             */
            ordering_on_dead: "block" | "skip";
        };
        QueueList: {
            queues: components["schemas"]["Queue"][];
        };
        SeriesMinute: {
            /**
             * Format: date-time
             * @description When the minute began
             */
            at: string;
            /** @description Attempts that ended in the minute, by category */
            attempts: {
                success: number;
                defer: number;
                transient: number;
                unknown: number;
                permanent: number;
            };
            /** @description Jobs that completed in the minute */
            completed: number;
            /** @description Jobs that went dead in the minute */
            dead: number;
            /** @description Median attempt latency, as the upper bound of its histogram bucket (within 26%); null when no attempt ended */
            p50_ms: number | null;
            /** @description 99th percentile attempt latency, likewise */
            p99_ms: number | null;
        };
        Series: {
            /** @description The last 60 minutes, oldest first, the current one last */
            minutes: components["schemas"]["SeriesMinute"][];
        };
        /** @description The job each occurrence enqueues: a job's fields, less id, idempotency_key, run_at and deadline (each occurrence's id is <schedule id>@<instant>, its key derived from it). */
        JobTemplateInput: {
            /**
             * @description A configured queue; another name is refused (422 unknown_queue).
             * @default default
             */
            queue?: string;
            request: {
                /** @description A standard method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT) in any case, sent in upper case; or another HTTP token in upper case, sent as written. */
                method: string;
                /**
                 * Format: uri
                 * @description An http or https URL with a host and a port other than 0, at most 8192 bytes.
                 */
                url: string;
                /** @description At most 100. Names are HTTP tokens, values at most 8192 bytes without control characters. Framing and hop-by-hop headers (Content-Length, Transfer-Encoding, Host, Connection, TE, Trailer, Upgrade, Keep-Alive, Proxy-*) are refused: the HTTP client sets them. */
                headers?: {
                    [key: string]: string;
                } | [
                    string,
                    string
                ][];
                /** @description A string is sent as is; any other JSON value is sent as JSON (content-type application/json unless given). null or absent: no body. At most server.max_job_body_bytes (413 job_body_too_large). */
                body?: unknown;
                /** @description The attempt's time limit: a duration with a unit, 1ms to 10m, e.g. "10s"; the server's default when absent. */
                timeout?: string;
                /** @description A credentials profile of the server's configuration ([credentials.NAME]) to send the request with, instead of its endpoint's credentials (another account at the same API, a tenant's own key). Unknown names are refused (422 invalid_field). The job stores the name only, never a secret. */
                credentials?: string;
            };
            /**
             * @description Higher runs first within a queue.
             * @default 0
             */
            priority?: number;
            /** @description At most 32 tags of 1 to 100 characters of plain text each, not only spaces: no control characters, bidirectional overrides or line separators (422 invalid_tags). */
            tags?: string[];
            /** @description Who the job is for (a tenant, a customer id). Within a queue, leasing goes round-robin across the groups with due work (jobs without a group take their turn as one group), and a queue may limit each group's concurrency and rate. 1 to 128 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators (422 invalid_group). */
            group?: string;
            /** @description Jobs of the queue with the same ordering key start one at a time, in the order they were enqueued (priority does not reorder them): a retry, a deferral or a hold of the key's head holds the key; a dead head holds it until it is replayed or dismissed (the queue's `ordering_on_dead` = block, the default) or lets the next go (skip); a replayed job takes its original place. Keys and groups combine. 1 to 256 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators (422 invalid_ordering_key). */
            ordering_key?: string;
            /** @description Endpoint grouping: 1 to 200 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators (422 invalid_endpoint); the URL's origin by default. Every endpoint control takes the same names. */
            endpoint?: string;
            /** @description Overrides of the queue's retry policy (the fields of a policy file: max_attempts, max_unknown_attempts, max_deferrals, max_age, max_server_wait, server_wait_jitter, trust_provider_hints, defer_with_server_wait, transient, unknown, safe_repeat_transient_backoff, deferral, rules). An unknown field or an invalid value is refused (422 invalid_policy or invalid_field). */
            policy?: Record<string, never> | null;
            callback?: components["schemas"]["CallbackInput"];
        };
        /** @description A recurring schedule: a cron expression (with a time zone) or an interval, and the job each occurrence enqueues. Give cron or every, not both. */
        ScheduleInput: {
            /** @description The schedule's name (1-90 of letters, digits, - _ . :, not only dots); each occurrence's job id is <id>@<instant, UTC>. Required by POST; with PUT, the path gives it (a body's id must match). */
            id?: string;
            /**
             * @description 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first; POSIX/Vixie semantics (Sunday is 0 or 7), plus L, W and #. Daylight saving, as Vixie cron: a fixed time of day (one second, minute and hour) skipped by the clock runs when the clock jumps, and runs once, at the first, when it happens twice; any other expression follows the clock (a skipped time does not happen, a repeated one runs twice).
             * @example 0 9 * * 1-5
             */
            cron?: string;
            /**
             * @description The IANA time zone the cron expression reads the wall clock of; UTC by default. Only with cron.
             * @example Europe/Berlin
             */
            timezone?: string;
            /**
             * @description An interval of real time instead of a cron expression: a whole number of seconds from 1s to 366d, with a unit; counted from the whole second the schedule is saved, the first occurrence one interval later.
             * @example 5m
             */
            every?: string;
            /**
             * @description Occurrences missed while Redial was down (found more than 60 s late): skip drops them; run_once runs one job for them all (the latest); run_all runs each, the latest missed_max at most.
             * @default run_once
             * @enum {string}
             */
            missed?: "skip" | "run_once" | "run_all";
            /**
             * @description With run_all: the most missed occurrences run.
             * @default 10
             */
            missed_max?: number;
            job: components["schemas"]["JobTemplateInput"];
        };
        Schedule: {
            id: string;
            rule: {
                cron: {
                    expr: string;
                    timezone: string;
                };
            } | {
                every: {
                    /** @example 5m */
                    interval: string;
                    /** Format: date-time */
                    anchor: string;
                };
            };
            missed: {
                /** @enum {string} */
                policy: "skip" | "run_once" | "run_all";
                max?: number;
            };
            /** @description The job each occurrence enqueues. */
            job: {
                queue: string;
                endpoint: string;
                /** @description The request each occurrence's job makes; secrets in its URL's query and its headers redacted, as a job's view redacts them. */
                request: {
                    method: string;
                    url: string;
                    /** @description [name, value] pairs. */
                    headers: string[][];
                    body?: string;
                    /** @description Each attempt's time limit; the engine's default when absent. */
                    timeout_ms?: number;
                    /** @description The credentials profile it is sent with, when it names one. */
                    credentials?: string;
                };
                priority: number;
                tags: string[];
                policy?: Record<string, never>;
                /** @description The group of each occurrence's job; absent when none. */
                group?: string;
                /** @description The ordering key of each occurrence's job; absent when none. */
                ordering_key?: string;
                /** @description Where each occurrence's job tells when it finishes (secrets in its URL and headers redacted); absent when none. */
                callback?: components["schemas"]["CallbackView"];
            };
            /**
             * @description config: defined in the configuration file, kept in step with it at each start.
             * @enum {string}
             */
            source: "api" | "config";
            paused: boolean;
            /**
             * Format: date-time
             * @description When the next occurrence falls; null when none will.
             */
            next_at: string | null;
            /**
             * Format: date-time
             * @description The latest occurrence enqueued.
             */
            last_occurrence: string | null;
            /**
             * Format: date-time
             * @description When it was enqueued.
             */
            last_fired_at: string | null;
            /** Format: date-time */
            created_at: string;
            /** Format: date-time */
            updated_at: string;
        };
        ScheduleList: {
            schedules: components["schemas"]["Schedule"][];
            /** @description Pass as cursor for the next page; null on the last one. */
            next_cursor: string | null;
        };
        /** @description What a group of a queue's jobs may use: attempts in flight and started per interval (across the cluster), and its turns in the queue's round-robin. */
        GroupLimits: {
            concurrency: number | null;
            /** @description Attempts per interval, such as "10/s". */
            rate: string | null;
            weight: number;
        };
        /** @description A queue's groups (tenants) with waiting or running jobs, most waiting first. */
        QueueGroups: {
            queue: string;
            /** @description Groups with waiting or running jobs, all of them; `groups` holds the first `limit`. */
            total: number;
            groups: {
                group: string;
                /** @description Jobs ready, scheduled or deferred. */
                waiting: number;
                /** @description Jobs leased and running, on every node. */
                running: number;
                /** @description Attempts in flight on this node, as the group's limits count them (0 when it has none). */
                in_flight_here: number;
                limits: components["schemas"]["GroupLimits"];
                forecast: components["schemas"]["Forecast"];
            }[];
        };
        /** @description Where Redial tells when the job finishes: a POST of a JSON event (type job.completed, job.dead or job.cancelled; data: the job's id, queue, group, tags, idempotency key, state, category, reason, counts, times, and the final response: status, headers that are not secrets, body as text or base64, content type, whether it was cut). The delivery is a job of its own in the callback queue (callbacks), with the whole policy, signed like any job of that queue or endpoint; its webhook-id (and idempotency key) is the same on every attempt of one event. The queue's callback applies when absent; a job of the callback queue has none (422 invalid_callback). */
        CallbackInput: {
            /**
             * Format: uri
             * @description An http or https URL with a host and a port other than 0.
             */
            url: string;
            /** @description The events that make a delivery; completed and dead when absent. */
            on?: ("completed" | "dead" | "cancelled")[];
            /** @description Headers the delivery carries, as a job's request headers (Content-Type is Redial's: application/json). */
            headers?: {
                [key: string]: string;
            } | [
                string,
                string
            ][];
        };
        CallbackView: {
            /** @description Secrets in the URL redacted. */
            url: string;
            on: ("completed" | "dead" | "cancelled")[];
            /** @description Secret values redacted. */
            headers: string[][];
            /** @description The queue its deliveries run in. */
            queue: string;
        };
        Event: {
            /** @description The event's cursor: pass it as after (or Last-Event-ID) to read on */
            id: string;
            /** @enum {string} */
            type: "job.completed" | "job.dead" | "job.cancelled" | "job.replayed" | "endpoint.paused" | "endpoint.resumed" | "endpoint.breaker_opened" | "endpoint.breaker_closed" | "endpoint.quarantined" | "endpoint.recovered";
            /** Format: date-time */
            at: string;
            /** @description The job's queue (job events) */
            queue: string | null;
            /** @description The job (job events): GET /v1/jobs/{id} for the rest */
            job_id: string | null;
            endpoint: string | null;
            /** @description The dead-letter category (job.dead) */
            category: string | null;
            /** @description Why: the job's last reason (for job.replayed, the reason it had died with), the pause's or the breaker's */
            reason: string | null;
            /**
             * Format: date-time
             * @description Until when a pause or an open breaker holds, as known when it began (none for a pause until resumed, or a breaker probing)
             */
            until: string | null;
        };
        EventPage: {
            events: components["schemas"]["Event"][];
            /** @description Pass as after to read on (also when events is empty: the log may grow) */
            next_cursor: string;
            /** @description Whether more events may follow at once; false: read again later */
            more: boolean;
            /** @description The after this page was read from */
            from: string | null;
        };
        DeadPattern: {
            /** @description The reason with its variable parts masked: <n> a number (its unit kept), <duration>, <time>, <uuid>, <id> a long word with digits, "<value>" a quoted value; a leading HTTP status is kept */
            pattern: string;
            /** @description Dead letters whose reason has this pattern */
            count: number;
            /**
             * Format: date-time
             * @description When the first of them went dead
             */
            first: string;
            /**
             * Format: date-time
             * @description When the last of them went dead
             */
            last: string;
            /** @description The reason of the last of them, word for word */
            example: string;
            /** @description How many different reasons it stands for */
            reasons: number;
        };
        DeadPatterns: {
            /** @description The largest patterns first (then by pattern), limit at most */
            patterns: components["schemas"]["DeadPattern"][];
            /** @description How many patterns there are, beyond the limit too */
            count: number;
            /** @description How many dead letters the filter matches */
            total: number;
        };
        /** @description What a replay changes; every field optional. The job's request with these changes passes the checks an enqueue does (URL, headers, body size, timeout, queue, endpoint, policy), or nothing is replayed (422, naming the job). */
        ReplayPatch: {
            /** @description The whole URL (not with url_prefix) */
            url?: string;
            /** @description The start of the URL: jobs whose URL starts with from get to instead; the others are skipped (422 invalid_url for one job) */
            url_prefix?: {
                from: string;
                to: string;
            };
            /** @description Headers removed, then set (each replacing every header of its name; names compared without case) */
            headers?: {
                set?: {
                    [key: string]: string;
                };
                remove?: string[];
            };
            /** @description The body: a string as is, any other JSON value as JSON (content-type application/json unless one is set), null for none */
            body?: unknown;
            /** @description A duration from 1ms to 10m, such as "10s" */
            timeout?: string;
            /** @description Replaces the job's policy overrides (as an enqueue's policy) */
            policy?: Record<string, never>;
            /** @description A configured queue */
            queue?: string;
            /** @description The endpoint; without it, a job whose endpoint was its URL's origin follows the new URL */
            endpoint?: string;
            /** @description The credentials profile to send with ([credentials.NAME]), or null for the endpoint's own */
            credentials?: string | null;
        };
        /** @description A replay's changes. With none (or an empty body) the job is replayed as it was. */
        ReplayInput: {
            patch?: components["schemas"]["ReplayPatch"];
            /**
             * @description keep (the default) sends the same idempotency key, so the provider still drops a repeat; renew gives the job a new one, for a first request that was wrong and must count as new
             * @enum {string}
             */
            key?: "keep" | "renew";
            /** @description true: answer what would change (ReplayPreview) and change nothing */
            dry_run?: boolean;
        };
        /** @description A job's request and routing (secrets redacted) */
        JobSide: {
            queue: string;
            endpoint: string;
            idempotency_key: string | null;
            request: components["schemas"]["RequestView"];
        };
        ReplayPreviewItem: {
            id: string;
            /** @description One line per change, for people (no header's value) */
            changed: string[];
            before: components["schemas"]["JobSide"];
            after: components["schemas"]["JobSide"];
        };
        /** @description What a replay with changes would do; nothing was changed */
        ReplayPreview: {
            /** @constant */
            dry_run: true;
            /** @description Dead letters the filter matches */
            matched: number;
            /** @description Those it would replay */
            affected: number;
            /** @description Those the patch is not for (their URL does not start with url_prefix.from) */
            skipped: number;
            /** @description The first few, before and after */
            preview: components["schemas"]["ReplayPreviewItem"][];
        };
        /** @description What one replay with changes did */
        JobChange: {
            /** Format: date-time */
            at: string;
            /** @description The replay it made (the job's replays count then) */
            replay: number;
            /** @description One line per change, for people (no header's value) */
            changed: string[];
            before: components["schemas"]["JobSide"];
        };
        /** @description A bulk replay or dismiss, run a chunk at a time (each chunk one transaction of at most 1,000 jobs). Operations live in the process that runs them: a restart forgets them, and each job was acted on or left as it was (run the same filter again for the rest). */
        Operation: {
            id: string;
            /** @enum {string} */
            kind: "replay" | "dismiss";
            /** @enum {string} */
            state: "running" | "done" | "cancelled" | "failed";
            /** @description The dead letters the filter matched when it started */
            total: number;
            /** @description Those acted on so far (more than total when more died meanwhile) */
            done: number;
            /** @description Chunks committed so far */
            chunks: number;
            /** Format: date-time */
            started_at: string;
            /** Format: date-time */
            finished_at: string | null;
            /** @description Why it failed */
            error: string | null;
        };
        OperationList: {
            /** @description This node's operations, newest first: those running and the last 100 finished */
            operations: components["schemas"]["Operation"][];
        };
        OutageReplay: {
            /** @description Dead letters replayed */
            affected: number;
            /** @description The bulk operation that did it (GET /v1/operations/{id}) */
            operation: string;
            /** @description The operation's end state */
            state: string;
            /**
             * Format: date-time
             * @description When the outage began: the dead letters that died since were replayed
             */
            since: string;
        };
        /** @description A page of a queue's ordering keys with a line (jobs waiting or running, or a dead head that blocks); pages carry on from the last key of the page before. */
        OrderingKeys: {
            queue: string;
            /**
             * @description The queue's setting: what a dead job does to its key.
             * @enum {string}
             */
            ordering_on_dead: "block" | "skip";
            keys: components["schemas"]["OrderingKeyLine"][];
            /** @description The cursor of the next page (the last key of this one); null on the last. */
            next_cursor: string | null;
        };
        /** @description One ordering key's line: the job that goes first and how many wait behind it. */
        OrderingKeyLine: {
            key: string;
            /** @description Its head is dead: the key waits until it is replayed or dismissed. */
            blocked: boolean;
            /** @description Jobs of the key waiting behind the head. */
            behind: number;
            /** @description Why the key's next job waits, in one line. */
            why: string;
            head: components["schemas"]["Job"];
        };
        /** @description How long a backlog takes to drain at the limits in force, and which waiting jobs are forecast to miss their deadline. The model: every job takes one request (retries, slow start and the retry budget are not counted), jobs start in the order they would be leased, each no sooner than its time; sending starts when what stops every job ends (a pause, an open breaker, suspect first attempts) and then goes at the smallest of the configured rate, the pace learned from bare 429s, and the concurrency over the attempt time measured on this node, within a learned quota's windows. See docs/simulate.md#forecasts. */
        Forecast: {
            /** @description Waiting jobs counted (due now and scheduled later). */
            waiting: number;
            /**
             * Format: date-time
             * @description When sending can start: now, or the end of what stops every job; null for a pause by hand with no end.
             */
            starts_at: string | null;
            /** @description Jobs a second once sending starts, in the long run; null when nothing known bounds it (no limit, and no attempt timed on this node yet). */
            jobs_per_second: number | null;
            /** @description What sets that pace, or why none is known, in words. */
            limited_by: string;
            /**
             * Format: date-time
             * @description When the last waiting job is forecast to start; null when the pace or the start is unknown.
             */
            drains_at: string | null;
            /** @description Seconds from now until drains_at. */
            drain_seconds: number | null;
            /** @description Waiting jobs with a deadline: an endpoint's or a group's first 10,000 in start order (a group's leave out the jobs waiting behind their ordering key's head). */
            with_deadline: number;
            /** @description Of those, the jobs whose deadline falls before their forecast start: what the alert rule deadline_at_risk counts. */
            deadline_at_risk: number;
            /** @description The first job in start order forecast to miss its deadline. */
            first_at_risk: null | {
                /** Format: date-time */
                deadline: string;
                /**
                 * Format: date-time
                 * @description null when sending has no known start.
                 */
                forecast_start: string | null;
            };
        };
        /** @description What an endpoint's requests carry that its jobs do not (docs/credentials.md). */
        EndpointCredentials: {
            /** @enum {string} */
            kind: "bearer" | "basic" | "header" | "oauth2_client_credentials" | "mtls";
            /** @description Where the secret (OAuth2: the client secret; mtls: the private key) is read from: "env NAME", "file PATH" or "literal". Never its value. */
            secret_from: string;
            /** @description Whether jobs may carry an Authorization header of their own (sent instead of the endpoint's credentials); refused with 422 invalid_header otherwise. */
            allow_job_credentials: boolean;
            /** @description The client certificate's file its connections present (mutual TLS: kind mtls, or cert_file and key_file beside another kind); null without one. */
            client_certificate: string | null;
            /** @description OAuth2 client credentials only: the access token's state on the node that answers (each node keeps its own). */
            token: components["schemas"]["EndpointToken"] | null;
        };
        EndpointToken: {
            /** @description The token endpoint, credentials in it redacted. */
            token_url: string;
            /** @description Whether this node holds a token. */
            held: boolean;
            /**
             * Format: date-time
             * @description When the token held expires (from expires_in); null with no token, or when the token endpoint gave no lifetime.
             */
            valid_until: string | null;
            /** @description Tokens this node fetched since it started. */
            fetched: number;
            last_failure: components["schemas"]["TokenFailure"] | null;
            /**
             * Format: date-time
             * @description The token endpoint's own breaker: after a failure it is not asked again until then (a second, doubling with each failure in a row up to a minute, or its Retry-After when longer); requests that need a token meanwhile are answered with the last failure. Null when it may be asked.
             */
            held_until: string | null;
            /** @description Failures to get a token in a row (0 once one came). */
            failures: number;
        };
        TokenFailure: {
            /** Format: date-time */
            at: string;
            /** @description Why no token came: the token endpoint's status and error code, or why it could not be reached. */
            reason: string;
        };
        /** @description One line of POST /v1/dead-letters/export: the dead job as POST /v1/jobs takes it (redial enqueue --file reads it back), and what became of it under dead. Secrets in its request are as sent. */
        ExportLine: {
            id: string;
            queue: string;
            endpoint: string;
            request: {
                method: string;
                url: string;
                /** @description [name, value] pairs, as the job sends them (secrets included: the export is the job as sent). */
                headers: string[][];
                /** @description The body as sent; null for none. */
                body: string | null;
                /** @description Each attempt's time limit, such as "5000ms"; null for the server's default. */
                timeout: string | null;
                /** @description The credentials profile it is sent with, if it names one. */
                credentials: string | null;
            };
            idempotency_key: string | null;
            priority: number;
            tags: string[];
            group: string | null;
            /** @description The job's own policy overrides; null when none. */
            policy: unknown;
            callback: components["schemas"]["ExportCallback"] | null;
            dead: {
                /**
                 * @description Its dead-letter category.
                 * @enum {string|null}
                 */
                category: "permanent" | "transient_exhausted" | "unknown_exhausted" | "deferral_exhausted" | "deadline_exceeded" | "budget_exhausted" | null;
                reason: string | null;
                /** Format: date-time */
                created_at: string;
                /** Format: date-time */
                finished_at: string | null;
                /** Format: date-time */
                deadline: string | null;
                replays: number;
                runs: number;
                attempts: components["schemas"]["Attempt"][];
            };
        };
        /** @description An exported job's callback, as POST /v1/jobs takes it (its headers as given). */
        ExportCallback: {
            url: string;
            on: ("completed" | "dead" | "cancelled")[];
            /** @description [name, value] pairs, as the job sends them (secrets included: the export is the job as sent). */
            headers: string[][];
        };
    };
    responses: {
        /** @description The request could not be read. Codes: invalid_json (the body is not JSON), invalid_body (the body could not be read), invalid_state, invalid_category, invalid_cursor, invalid_limit, invalid_event_kind, invalid_pattern, invalid_idempotency_key, invalid_tags, invalid_reason_text, unknown_parameter (query parameters of GET /v1/jobs and GET /v1/events), bad_request (a path or query the router could not decode, such as a path that is not UTF-8). */
        BadRequest: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description The server has a token and the request has no 'Authorization: Bearer <token>', or a wrong one. Code: unauthorized. */
        Unauthorized: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Refused as what a web page could send to an API on loopback. Codes: foreign_host (the Host is not a loopback name or one of server.allowed_hosts: DNS rebinding), cross_site (Sec-Fetch-Site is cross-site, or Origin is not the request's own). read_only (the read-only token may read, not change anything). */
        Forbidden: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description No such job or endpoint. Code: not_found. */
        NotFound: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Codes: conflict (a job with this id exists with a different request: use another id, or send the same request to get the existing job), invalid_state (the job is not in a state the action applies to: only dead jobs are replayed or dismissed, only unfinished ones cancelled). */
        Conflict: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description Codes: body_too_large (the request body is over server.max_request_bytes), batch_too_large (more jobs than server.max_batch), job_body_too_large (a job's request.body is over server.max_job_body_bytes). */
        PayloadTooLarge: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description The request declares a Content-Type other than JSON (application/json or *\/*+json). Code: unsupported_media_type. */
        UnsupportedMediaType: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description The JSON was read but a value is not acceptable; the message names it. Codes: invalid_field (a field of the wrong type, an unknown field, a missing one), unknown_queue, reserved_queue (the callbacks or notifications queue: Redial's own signed deliveries), invalid_id, invalid_method, invalid_url, invalid_header, invalid_timeout, invalid_idempotency_key, invalid_deadline, invalid_tags, invalid_policy, invalid_endpoint, invalid_group, invalid_category, invalid_pattern, invalid_reason, invalid_range, invalid_schedule, empty_batch, filter_required. */
        Unprocessable: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description The request body did not arrive within server.body_timeout (30 s by default); the connection is closed. Code: request_timeout. */
        RequestTimeout: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description The store cannot serve now (a full disk, a read-only or damaged database, a lost connection); nothing was done: try again after Retry-After. Code: storage_unavailable. */
        Unavailable: {
            headers: {
                /** @description Seconds to wait before trying again */
                "Retry-After"?: string;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
        /** @description A server fault (the store failed); the server log has the details. Code: internal. */
        Internal: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["Error"];
            };
        };
    };
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    listJobs: {
        parameters: {
            query?: {
                /** @description A configured queue (422 unknown_queue otherwise) */
                queue?: string;
                /** @description Job state */
                state?: "scheduled" | "ready" | "running" | "deferred" | "completed" | "dead" | "cancelled";
                /** @description Dead-letter category */
                category?: "permanent" | "transient_exhausted" | "unknown_exhausted" | "deferral_exhausted" | "deadline_exceeded" | "budget_exhausted";
                /** @description Endpoint name */
                endpoint?: string;
                /** @description Only the dead letters whose reason has this pattern (GET /v1/dead-letters/patterns); implies state=dead, and any other state is refused (400 invalid_pattern) */
                pattern?: string;
                /** @description Only the job(s) with this idempotency key, exactly (the one a job names or the one Redial derived for it, as sent in the request's header); answered from an index. 1 to 255 printable ASCII characters without spaces (400 invalid_idempotency_key) */
                idempotency_key?: string;
                /** @description Only jobs with this tag, exactly; answered from an index. 1 to 100 characters of plain text, as an enqueue takes (400 invalid_tags) */
                tag?: string;
                /** @description Only the dead letters whose reason has, for each word given (letters and digits; case does not matter), a word that starts with it: "cert expired" finds "TLS certificate expired". 1 to 8 words in at most 1,000 characters; implies state=dead, and any other state is refused (400 invalid_reason_text). Answered from an index of the words of dead letters' reasons, brought up to date first */
                reason_text?: string;
                /** @description next_cursor of the previous page */
                cursor?: string;
                /** @description Jobs per page */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of jobs */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["JobPage"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    enqueueJob: {
        parameters: {
            query?: never;
            header?: {
                /** @description The caller's W3C trace context: a valid one makes the job(s) join that trace (the job's request carries it unless it has its own); an invalid one is ignored. */
                traceparent?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["JobInput"];
            };
        };
        responses: {
            /** @description Deduplicated: a job with this id and the same request exists; it is returned, with deduplicated true */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            /** @description Stored: the new job, with deduplicated false */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            408: components["responses"]["RequestTimeout"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    enqueueBatch: {
        parameters: {
            query?: never;
            header?: {
                /** @description The caller's W3C trace context: a valid one makes the job(s) join that trace (the job's request carries it unless it has its own); an invalid one is ignored. */
                traceparent?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["BatchInput"];
            };
        };
        responses: {
            /** @description Every job already existed (all deduplicated) */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BatchResult"];
                };
            };
            /** @description At least one job was stored */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BatchResult"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            408: components["responses"]["RequestTimeout"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    getJob: {
        parameters: {
            query?: {
                /** @description Wait up to this long for the job to finish (at most 60s; 400 invalid_wait otherwise) */
                wait?: string;
            };
            header?: never;
            path: {
                /** @description The job's id (percent-encoded) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The job, with attempt_log */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    replayJob: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The job's id (percent-encoded) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["ReplayInput"];
            };
        };
        responses: {
            /** @description The replayed job, or with dry_run what would change */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"] | components["schemas"]["ReplayPreview"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            408: components["responses"]["RequestTimeout"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    dismissJob: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The job's id (percent-encoded) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Dismissed"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            408: components["responses"]["RequestTimeout"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    cancelJob: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The job's id (percent-encoded) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The job: cancelled, or running with cancel_requested */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Job"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            408: components["responses"]["RequestTimeout"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    replayDeadLetters: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["DeadLetterFilter"];
            };
        };
        responses: {
            /** @description How many jobs were replayed (with changes, how many matched and were skipped), or with dry_run what would change */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Affected"] | components["schemas"]["ReplayPreview"];
                };
            };
            /** @description Started: the operation, to follow at GET /v1/operations/{id} (with wait: false) */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Operation"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            408: components["responses"]["RequestTimeout"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    dismissDeadLetters: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["DeadLetterFilter"];
            };
        };
        responses: {
            /** @description How many jobs were deleted */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Affected"];
                };
            };
            /** @description Started: the operation, to follow at GET /v1/operations/{id} (with wait: false) */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Operation"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            408: components["responses"]["RequestTimeout"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    exportDeadLetters: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["DeadLetterFilter"];
            };
        };
        responses: {
            /** @description NDJSON, a dead letter a line (each an ExportLine), oldest first */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/x-ndjson": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            408: components["responses"]["RequestTimeout"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    stats: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Counts */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Stats"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    listEndpoints: {
        parameters: {
            query?: {
                /** @description next_cursor of the previous page */
                cursor?: string;
                /** @description Endpoints per page */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Endpoints with jobs waiting, configured, or seen lately (unseen ones that hold nothing are forgotten after retention.endpoints), by name */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EndpointList"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    getEndpoint: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The endpoint's name (a URL origin such as https://api.example.com, unless a job named another), percent-encoded
                 * @example https://api.example.com
                 */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The endpoint */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Endpoint"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    alerts: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The rules' states */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AlertList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
        };
    };
    backup: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The copy, a SQLite database file */
            200: {
                headers: {
                    /** @description The jobs the copy holds */
                    "X-Redial-Backup-Jobs"?: number;
                    /** @description The copy's size in bytes */
                    "Content-Length"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/vnd.sqlite3": string;
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
            /** @description This server's store is not one file (PostgreSQL): back it up with its own tools. Code: not_supported. */
            501: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            503: components["responses"]["Unavailable"];
        };
    };
    openapi: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The OpenAPI document */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": Record<string, never>;
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
        };
    };
    metrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The exposition */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    healthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Alive */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Health"];
                };
            };
            403: components["responses"]["Forbidden"];
        };
    };
    readyz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Ready */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Ready"];
                };
            };
            403: components["responses"]["Forbidden"];
            /** @description The store cannot serve and write now; reason says why */
            503: {
                headers: {
                    /** @description Seconds to wait before trying again */
                    "Retry-After"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotReady"];
                };
            };
        };
    };
    deadLetterGroups: {
        parameters: {
            query?: {
                /** @description Only this queue (it must exist) */
                queue?: string;
                /** @description Only this dead-letter category */
                category?: "permanent" | "transient_exhausted" | "unknown_exhausted" | "deferral_exhausted" | "deadline_exceeded" | "budget_exhausted";
                /** @description Only this endpoint (a URL origin) */
                endpoint?: string;
                /** @description Created at or after (RFC 3339) */
                since?: string;
                /** @description Created before (RFC 3339); not before since (422 invalid_range) */
                until?: string;
                /** @description Only the dead letters whose reason has this pattern (GET /v1/dead-letters/patterns); at most 1,000 characters of plain text (400 invalid_pattern) */
                pattern?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The groups and their total */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DeadGroups"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    deadLetterPatterns: {
        parameters: {
            query?: {
                /** @description Only this queue (it must exist) */
                queue?: string;
                /** @description Only this dead-letter category */
                category?: "permanent" | "transient_exhausted" | "unknown_exhausted" | "deferral_exhausted" | "deadline_exceeded" | "budget_exhausted";
                /** @description Only this endpoint (a URL origin) */
                endpoint?: string;
                /** @description Created at or after (RFC 3339) */
                since?: string;
                /** @description Created before (RFC 3339); not before since (422 invalid_range) */
                until?: string;
                /** @description At most this many patterns, 1 to 500 (100 by default) */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The patterns, how many there are, and the dead letters matched */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DeadPatterns"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    listOperations: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The operations */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OperationList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    getOperation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The operation's id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The operation */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Operation"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    cancelOperation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The operation's id */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The operation, still running until its chunk under way commits */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Operation"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["Conflict"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    session: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The session */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Session"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    pauseEndpoint: {
        parameters: {
            query?: {
                /** @description Set the control even if the endpoint is not known yet (no jobs, no configuration, not seen): to pause it before its first job. Without it, an unknown endpoint is 404. */
                create?: boolean;
            };
            header?: never;
            path: {
                /**
                 * @description The endpoint's name (a URL origin such as https://api.example.com, unless a job named another), percent-encoded
                 * @example https://api.example.com
                 */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["PauseInput"];
            };
        };
        responses: {
            /** @description The endpoint, paused */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Endpoint"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            408: components["responses"]["RequestTimeout"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    resumeEndpoint: {
        parameters: {
            query?: {
                /** @description Set the control even if the endpoint is not known yet (no jobs, no configuration, not seen): to pause it before its first job. Without it, an unknown endpoint is 404. */
                create?: boolean;
            };
            header?: never;
            path: {
                /**
                 * @description The endpoint's name (a URL origin such as https://api.example.com, unless a job named another), percent-encoded
                 * @example https://api.example.com
                 */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The endpoint, resumed */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Endpoint"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            408: components["responses"]["RequestTimeout"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    resetEndpointBreaker: {
        parameters: {
            query?: {
                /** @description Set the control even if the endpoint is not known yet (no jobs, no configuration, not seen): to pause it before its first job. Without it, an unknown endpoint is 404. */
                create?: boolean;
            };
            header?: never;
            path: {
                /**
                 * @description The endpoint's name (a URL origin such as https://api.example.com, unless a job named another), percent-encoded
                 * @example https://api.example.com
                 */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The endpoint, its breaker closed */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Endpoint"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            408: components["responses"]["RequestTimeout"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    listQueues: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The queues */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["QueueList"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
        };
    };
    queueGroups: {
        parameters: {
            query?: {
                limit?: number;
            };
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The queue's groups */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["QueueGroups"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    queueOrderingKeys: {
        parameters: {
            query?: {
                /** @description Only the keys whose head is dead. */
                blocked?: boolean;
                /** @description The `next_cursor` of the page before. */
                cursor?: string;
                limit?: number;
            };
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The queue's ordering keys */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OrderingKeys"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
        };
    };
    pauseQueue: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description A configured queue's name
                 * @example default
                 */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["PauseInput"];
            };
        };
        responses: {
            /** @description The queue, paused */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Queue"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            408: components["responses"]["RequestTimeout"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    resumeQueue: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description A configured queue's name
                 * @example default
                 */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The queue, resumed */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Queue"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            408: components["responses"]["RequestTimeout"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    getSeries: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The series */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Series"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
        };
    };
    listSchedules: {
        parameters: {
            query?: {
                /** @description next_cursor of the previous page */
                cursor?: string;
                /** @description Schedules per page */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The schedules */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ScheduleList"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    createSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ScheduleInput"];
            };
        };
        responses: {
            /** @description The schedule, with its next occurrence */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Schedule"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            408: components["responses"]["RequestTimeout"];
            409: components["responses"]["Conflict"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    getSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The schedule's id
                 * @example nightly-report
                 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The schedule */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Schedule"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    putSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The schedule's id
                 * @example nightly-report
                 */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ScheduleInput"];
            };
        };
        responses: {
            /** @description The schedule, replaced */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Schedule"];
                };
            };
            /** @description The schedule, created */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Schedule"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            408: components["responses"]["RequestTimeout"];
            413: components["responses"]["PayloadTooLarge"];
            415: components["responses"]["UnsupportedMediaType"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    deleteSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The schedule's id
                 * @example nightly-report
                 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Deleted */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    pauseSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The schedule's id
                 * @example nightly-report
                 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The schedule */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Schedule"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    resumeSchedule: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The schedule's id
                 * @example nightly-report
                 */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The schedule */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Schedule"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    listEvents: {
        parameters: {
            query?: {
                /** @description Read the events after this one: an event's id, or next_cursor of a previous page (400 invalid_cursor otherwise). Without it: from the oldest event kept (the stream: from now on). */
                after?: string;
                /** @description Only job events of these queues, comma-separated (endpoint events have no queue and are left out) */
                queue?: string;
                /** @description Only these kinds, comma-separated: job.completed, job.dead, job.cancelled, job.replayed, endpoint.paused, endpoint.resumed, endpoint.breaker_opened, endpoint.breaker_closed, endpoint.quarantined, endpoint.recovered (400 invalid_event_kind otherwise) */
                kind?: string;
                /** @description At most this many events (1 to 1000, default 100; 400 invalid_limit otherwise) */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of events */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventPage"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    streamEvents: {
        parameters: {
            query?: {
                /** @description Read the events after this one: an event's id, or next_cursor of a previous page (400 invalid_cursor otherwise). Without it: from the oldest event kept (the stream: from now on). */
                after?: string;
                /** @description Only job events of these queues, comma-separated (endpoint events have no queue and are left out) */
                queue?: string;
                /** @description Only these kinds, comma-separated: job.completed, job.dead, job.cancelled, job.replayed, endpoint.paused, endpoint.resumed, endpoint.breaker_opened, endpoint.breaker_closed, endpoint.quarantined, endpoint.recovered (400 invalid_event_kind otherwise) */
                kind?: string;
            };
            header?: {
                /** @description The id of the last event received: the stream goes on after it */
                "Last-Event-ID"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The stream (text/event-stream); it does not end on its own */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
    replayEndpointOutage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /**
                 * @description The endpoint's name (a URL origin such as https://api.example.com, unless a job named another), percent-encoded
                 * @example https://api.example.com
                 */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Replayed: how many, by which operation, and since when */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OutageReplay"];
                };
            };
            401: components["responses"]["Unauthorized"];
            403: components["responses"]["Forbidden"];
            404: components["responses"]["NotFound"];
            422: components["responses"]["Unprocessable"];
            500: components["responses"]["Internal"];
            503: components["responses"]["Unavailable"];
        };
    };
}
