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
export type DeadGroups = Schemas["DeadGroups"];
export type Stats = Schemas["Stats"];
export type Endpoint = Schemas["Endpoint"];
export type EndpointList = Schemas["EndpointList"];
export type AlertList = Schemas["AlertList"];
export type PauseInput = Schemas["PauseInput"];
export type Queue = Schemas["Queue"];
export type QueueList = Schemas["QueueList"];
export type Health = Schemas["Health"];
export type ScheduleInput = Schemas["ScheduleInput"];
export type Schedule = Schemas["Schedule"];
export type ScheduleList = Schemas["ScheduleList"];
export type ApiError = Schemas["Error"];

/** Filters for listJobs; `limit` is the page size, the iterator still yields every match. */
export type JobFilter = NonNullable<operations["listJobs"]["parameters"]["query"]>;
