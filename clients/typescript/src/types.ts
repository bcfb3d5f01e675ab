// Owns the friendly names for the generated API types (src/api-types.ts) that the client takes and returns.
import type { components, operations } from "./api-types.js";

type Schemas = components["schemas"];

export type JobInput = Schemas["JobInput"];
export type CallbackInput = Schemas["CallbackInput"];
export type CallbackView = Schemas["CallbackView"];
export type Job = Schemas["Job"];
export type JobState = Schemas["Job"]["state"];
export type Attempt = Schemas["Attempt"];
export type JobPage = Schemas["JobPage"];
export type BatchResult = Schemas["BatchResult"];
export type Dismissed = Schemas["Dismissed"];
export type Affected = Schemas["Affected"];
export type DeadLetterFilter = Schemas["DeadLetterFilter"];
export type ReplayInput = Schemas["ReplayInput"];
export type ReplayPatch = Schemas["ReplayPatch"];
export type ReplayPreview = Schemas["ReplayPreview"];
export type JobChange = Schemas["JobChange"];
export type DeadGroups = Schemas["DeadGroups"];
export type DeadPattern = Schemas["DeadPattern"];
export type DeadPatterns = Schemas["DeadPatterns"];
/** Which dead letters `deadLetterGroups` groups: queue, category, endpoint, since, until, pattern. */
export type DeadGroupsQuery = NonNullable<operations["deadLetterGroups"]["parameters"]["query"]>;
/** Which dead letters `deadLetterPatterns` groups, and at most how many patterns it gives. */
export type DeadPatternsQuery = NonNullable<operations["deadLetterPatterns"]["parameters"]["query"]>;
export type Stats = Schemas["Stats"];
export type Endpoint = Schemas["Endpoint"];
export type EndpointList = Schemas["EndpointList"];
export type OutageReplay = Schemas["OutageReplay"];
/** A page of endpoints or schedules: `cursor` a page's next_cursor, `limit` 1 to 500 (100 by default). */
export type PageQuery = NonNullable<operations["listEndpoints"]["parameters"]["query"]>;
export type AlertList = Schemas["AlertList"];
export type PauseInput = Schemas["PauseInput"];
export type Queue = Schemas["Queue"];
export type QueueList = Schemas["QueueList"];
export type OrderingKeys = Schemas["OrderingKeys"];
export type OrderingKeyLine = Schemas["OrderingKeyLine"];
/**
 * Which of a queue's ordering keys `orderingKeys` lists: only those whose head is dead when `blocked`,
 * after `cursor` (a page's next_cursor), at most `limit` (1 to 500, 100 by default).
 */
export type OrderingKeysQuery = NonNullable<operations["queueOrderingKeys"]["parameters"]["query"]>;
export type Health = Schemas["Health"];
export type ScheduleInput = Schemas["ScheduleInput"];
export type Schedule = Schemas["Schedule"];
export type ScheduleList = Schemas["ScheduleList"];
export type ApiError = Schemas["Error"];
export type Event = Schemas["Event"];
export type EventKind = Schemas["Event"]["type"];
export type EventPage = Schemas["EventPage"];

/** Filters for listJobs; `limit` is the page size, the iterator still yields every match. */
export type JobFilter = NonNullable<operations["listJobs"]["parameters"]["query"]>;

/**
 * Which events `events` reads, and from where: `after` an event's id or a page's next_cursor (without
 * it, from the oldest event kept), only job events of `queue`, only the kinds in `kind`, at most
 * `limit` (1 to 1000, default 100). A list may be given as an array or comma-separated.
 */
export type EventQuery = Omit<NonNullable<operations["listEvents"]["parameters"]["query"]>, "queue" | "kind"> & {
  queue?: string | readonly string[];
  /** Typed open, as ErrorCode is, so that a newer server's kind still reads. */
  kind?: EventKind | readonly EventKind[] | (string & {});
};

/** Which events `streamEvents` follows: as for `events`, without `limit`; without `after`, from now on. */
export type EventStreamQuery = Omit<EventQuery, "limit">;
