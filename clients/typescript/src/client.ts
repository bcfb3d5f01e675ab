// Owns the Redial class: one method per API operation, built on Transport.
import { randomUUID } from "node:crypto";
import { eventParams, streamEvents, type StreamOptions } from "./events.js";
import { Transport } from "./transport.js";
import type {
  Affected,
  AlertList,
  BatchResult,
  DeadGroups,
  DeadGroupsQuery,
  DeadLetterFilter,
  DeadPatterns,
  DeadPatternsQuery,
  PageQuery,
  OutageReplay,
  Dismissed,
  Endpoint,
  EndpointList,
  Event,
  EventPage,
  EventQuery,
  EventStreamQuery,
  Health,
  Job,
  JobFilter,
  JobInput,
  JobPage,
  OrderingKeys,
  OrderingKeysQuery,
  PauseInput,
  Queue,
  QueueList,
  ReplayInput,
  ReplayPreview,
  Schedule,
  ScheduleInput,
  ScheduleList,
  Stats,
} from "./types.js";

export interface RedialOptions {
  /** The server's URL; defaults to $REDIAL_SERVER, then http://127.0.0.1:8080. */
  baseUrl?: string;
  /** Bearer token; defaults to $REDIAL_TOKEN. */
  token?: string;
  /** Per-request timeout in milliseconds (each retry gets its own); default 30 000. */
  timeoutMs?: number;
  /** Retries on connection errors, timeouts, 429 and 503; default 3. */
  maxRetries?: number;
}

const DEFAULT_BASE_URL = "http://127.0.0.1:8080";
/** The longest one waiting request may wait (the server's bound). */
const MAX_WAIT_MS = 60_000;
const FINISHED = new Set(["completed", "dead", "cancelled"]);

export class Redial {
  private readonly transport: Transport;
  private readonly timeoutMs: number;

  constructor(options: RedialOptions = {}) {
    const token = options.token ?? process.env.REDIAL_TOKEN;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.transport = new Transport({
      baseUrl: options.baseUrl ?? process.env.REDIAL_SERVER ?? DEFAULT_BASE_URL,
      token: token ? token : undefined,
      timeoutMs: this.timeoutMs,
      maxRetries: options.maxRetries ?? 3,
    });
  }

  /** Enqueues one job. Without an id, one is generated here so that a retried request cannot enqueue twice. */
  enqueue(job: JobInput): Promise<Job> {
    return this.transport.request<Job>({ method: "POST", path: "/v1/jobs", body: withId(job) });
  }

  /** Enqueues jobs atomically: all are stored (or deduplicated), or none. */
  enqueueBatch(jobs: JobInput[]): Promise<BatchResult> {
    return this.transport.request<BatchResult>({
      method: "POST",
      path: "/v1/jobs/batch",
      body: { jobs: jobs.map(withId) },
    });
  }

  /** One job, with its attempt_log. */
  getJob(id: string): Promise<Job> {
    return this.transport.request<Job>({ method: "GET", path: `/v1/jobs/${enc(id)}` });
  }

  /**
   * The job once it has finished (completed, dead or cancelled), or as it stands when `waitMs` ends
   * (at most 60 000): one request, answered by the server when the job changes.
   */
  getJobAfter(id: string, waitMs: number): Promise<Job> {
    const wait = Math.max(0, Math.min(Math.round(waitMs), MAX_WAIT_MS));
    return this.transport.request<Job>({
      method: "GET",
      path: `/v1/jobs/${enc(id)}`,
      query: { wait: `${wait}ms` },
      timeoutMs: wait + Math.max(this.timeoutMs, 5_000),
    });
  }

  /**
   * Waits up to `timeoutMs` (default 60 000) for the job to finish, in waits of at most 60 s, and
   * returns it as it stands then: finished, unless the time ran out (check `state`).
   */
  async waitForJob(id: string, options: { timeoutMs?: number } = {}): Promise<Job> {
    const end = Date.now() + (options.timeoutMs ?? 60_000);
    for (;;) {
      const left = Math.max(0, end - Date.now());
      const job = await this.getJobAfter(id, left);
      if (FINISHED.has(job.state) || left <= MAX_WAIT_MS) return job;
    }
  }

  /** One page of jobs; pass the previous page's next_cursor as cursor. */
  listJobsPage(filter: JobFilter = {}): Promise<JobPage> {
    return this.transport.request<JobPage>({ method: "GET", path: "/v1/jobs", query: { ...filter } });
  }

  /** Every job matching the filter, fetching page after page (filter.limit is the page size). */
  async *listJobs(filter: Omit<JobFilter, "cursor"> = {}): AsyncGenerator<Job, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.listJobsPage({ ...filter, cursor });
      yield* page.jobs;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /**
   * Replays a dead job: as it was, or with changes (`{ patch, key }`: its request or routing
   * patched, its idempotency key kept or renewed), checked as an enqueue is.
   */
  replay(id: string, changes?: Omit<ReplayInput, "dry_run">): Promise<Job> {
    const body = changes === undefined ? undefined : { ...changes, dry_run: false };
    return this.transport.request<Job>({ method: "POST", path: `/v1/jobs/${enc(id)}/replay`, body });
  }

  /** What `replay(id, changes)` would do; changes nothing. */
  previewReplay(id: string, changes: Omit<ReplayInput, "dry_run">): Promise<ReplayPreview> {
    return this.transport.request<ReplayPreview>({
      method: "POST",
      path: `/v1/jobs/${enc(id)}/replay`,
      body: { ...changes, dry_run: true },
    });
  }

  /** What `replayDeadLetters(filter)` would do with the filter's patch; changes nothing. */
  previewDeadLetters(filter: DeadLetterFilter): Promise<ReplayPreview> {
    return this.transport.request<ReplayPreview>({
      method: "POST",
      path: "/v1/dead-letters/replay",
      body: { ...(filter as object), dry_run: true },
    });
  }

  dismiss(id: string): Promise<Dismissed> {
    return this.transport.request<Dismissed>({ method: "POST", path: `/v1/jobs/${enc(id)}/dismiss` });
  }

  cancel(id: string): Promise<Job> {
    return this.transport.request<Job>({ method: "POST", path: `/v1/jobs/${enc(id)}/cancel` });
  }

  /**
   * Replays the dead letters matching the filter ({ all: true } for every one); with a `patch`
   * (and `key`), job by job with those changes.
   */
  replayDeadLetters(filter: DeadLetterFilter): Promise<Affected> {
    return this.transport.request<Affected>({
      method: "POST",
      path: "/v1/dead-letters/replay",
      body: { ...(filter as object), dry_run: false },
    });
  }

  /** Dismisses the dead letters matching the filter ({ all: true } for every one). */
  dismissDeadLetters(filter: DeadLetterFilter): Promise<Affected> {
    return this.transport.request<Affected>({ method: "POST", path: "/v1/dead-letters/dismiss", body: filter });
  }

  /** Dead letters grouped by queue, category and endpoint, largest first; the query narrows them. */
  deadLetterGroups(query: DeadGroupsQuery = {}): Promise<DeadGroups> {
    return this.transport.request<DeadGroups>({ method: "GET", path: "/v1/dead-letters/groups", query: { ...query } });
  }

  /**
   * Dead letters grouped by the pattern of their reason (numbers, ids and times masked), largest
   * first. A pattern is a filter: `replayDeadLetters({ pattern })`, `listJobs({ pattern })`.
   */
  deadLetterPatterns(query: DeadPatternsQuery = {}): Promise<DeadPatterns> {
    return this.transport.request<DeadPatterns>({ method: "GET", path: "/v1/dead-letters/patterns", query: { ...query } });
  }

  stats(): Promise<Stats> {
    return this.transport.request<Stats>({ method: "GET", path: "/v1/stats" });
  }

  /** A page of endpoints by name (100 unless limit says); pass next_cursor as cursor for the next. */
  endpoints(page: PageQuery = {}): Promise<EndpointList> {
    return this.transport.request<EndpointList>({ method: "GET", path: "/v1/endpoints", query: { ...page } });
  }

  /** One endpoint by name, usually a URL origin such as https://api.example.com. */
  endpoint(name: string): Promise<Endpoint> {
    return this.transport.request<Endpoint>({ method: "GET", path: `/v1/endpoints/${enc(name)}` });
  }

  /**
   * Holds deliveries to an endpoint, until resumed, or for a duration ({ for: "30m" }), or until an instant.
   * An endpoint not known yet is a 404 unless { create: true } (to pause it before its first job).
   */
  pauseEndpoint(name: string, pause: PauseInput = {}, options: { create?: boolean } = {}): Promise<Endpoint> {
    const query = options.create ? { create: "true" } : undefined;
    return this.transport.request<Endpoint>({ method: "POST", path: `/v1/endpoints/${enc(name)}/pause`, query, body: pause });
  }

  resumeEndpoint(name: string): Promise<Endpoint> {
    return this.transport.request<Endpoint>({ method: "POST", path: `/v1/endpoints/${enc(name)}/resume` });
  }

  /** Replays the endpoint's dead letters that died since its last outage began. */
  replayOutage(name: string): Promise<OutageReplay> {
    return this.transport.request<OutageReplay>({ method: "POST", path: `/v1/endpoints/${enc(name)}/replay-outage` });
  }

  resetBreaker(name: string): Promise<Endpoint> {
    return this.transport.request<Endpoint>({ method: "POST", path: `/v1/endpoints/${enc(name)}/reset-breaker` });
  }

  queues(): Promise<QueueList> {
    return this.transport.request<QueueList>({ method: "GET", path: "/v1/queues" });
  }

  /**
   * A page of the queue's ordering keys with a line (in an order of its own, stable from page to page): each key's head (the job that goes first), how
   * many of its jobs wait behind it and why the next one waits. `blocked: true` lists only the keys whose
   * head is dead (they wait for it to be replayed or dismissed); pass next_cursor as cursor for the next
   * page (100 keys unless limit says). An unknown queue is a 404 (`not_found`).
   */
  orderingKeys(queue: string, query: OrderingKeysQuery = {}): Promise<OrderingKeys> {
    const { blocked, ...page } = query;
    return this.transport.request<OrderingKeys>({
      method: "GET",
      path: `/v1/queues/${enc(queue)}/ordering-keys`,
      query: { ...page, blocked: blocked ? "true" : undefined },
    });
  }

  pauseQueue(name: string, pause: PauseInput = {}): Promise<Queue> {
    return this.transport.request<Queue>({ method: "POST", path: `/v1/queues/${enc(name)}/pause`, body: pause });
  }

  resumeQueue(name: string): Promise<Queue> {
    return this.transport.request<Queue>({ method: "POST", path: `/v1/queues/${enc(name)}/resume` });
  }

  /** A page of schedules by id (100 unless limit says); pass next_cursor as cursor for the next. */
  listSchedules(page: PageQuery = {}): Promise<ScheduleList> {
    return this.transport.request<ScheduleList>({ method: "GET", path: "/v1/schedules", query: { ...page } });
  }

  schedule(id: string): Promise<Schedule> {
    return this.transport.request<Schedule>({ method: "GET", path: `/v1/schedules/${enc(id)}` });
  }

  /** Creates a schedule; one with the same id already there is a 409 (`schedule_exists`). */
  createSchedule(input: ScheduleInput & { id: string }): Promise<Schedule> {
    return this.transport.request<Schedule>({ method: "POST", path: "/v1/schedules", body: input });
  }

  /** Creates the schedule of this id, or replaces it (keeping its pause). */
  putSchedule(id: string, input: Omit<ScheduleInput, "id">): Promise<Schedule> {
    return this.transport.request<Schedule>({ method: "PUT", path: `/v1/schedules/${enc(id)}`, body: input });
  }

  /** Deletes a schedule; the jobs it enqueued stay. */
  async deleteSchedule(id: string): Promise<void> {
    await this.transport.request<unknown>({ method: "DELETE", path: `/v1/schedules/${enc(id)}` });
  }

  pauseSchedule(id: string): Promise<Schedule> {
    return this.transport.request<Schedule>({ method: "POST", path: `/v1/schedules/${enc(id)}/pause` });
  }

  resumeSchedule(id: string): Promise<Schedule> {
    return this.transport.request<Schedule>({ method: "POST", path: `/v1/schedules/${enc(id)}/resume` });
  }

  /**
   * One page of the event log (jobs completed, dead, cancelled, replayed; endpoints paused, resumed,
   * breakers opened, closed), in the log's order; read on with `after: page.next_cursor`. A page may
   * hold fewer than `limit` events with `more` true when filters leave most rows out.
   */
  events(query: EventQuery = {}): Promise<EventPage> {
    return this.transport.request<EventPage>({ method: "GET", path: "/v1/events", query: eventParams(query) });
  }

  /**
   * The event log live (Server-Sent Events), as an async iterator: from `after` (an event's id), or
   * from now on without it. A connection that drops is reopened by itself, after a short pause, with
   * Last-Event-ID set to the last event yielded, so nothing is missed or repeated (while the log keeps
   * the events, retention.events). Breaking out of the loop, or aborting `signal`, closes it.
   */
  streamEvents(query: EventStreamQuery = {}, options: StreamOptions = {}): AsyncGenerator<Event, void, undefined> {
    return streamEvents(this.transport, query, options);
  }

  alerts(): Promise<AlertList> {
    return this.transport.request<AlertList>({ method: "GET", path: "/v1/alerts" });
  }

  health(): Promise<Health> {
    return this.transport.request<Health>({ method: "GET", path: "/healthz" });
  }
}

function withId(job: JobInput): JobInput {
  return job.id ? job : { ...job, id: randomUUID() };
}

function enc(segment: string): string {
  return encodeURIComponent(segment);
}
