// Owns remembering which webhook-ids were handled: the interface a callback route claims an id
// through, and the default implementation, in this process's memory.

/**
 * What `begin` found: `new` (no delivery of this id was handled or is being handled: it is now
 * claimed, and the handler runs), `handling` (another delivery of it is being handled right now),
 * `handled` (one was handled).
 */
export type CallbackClaim = "new" | "handling" | "handled";

/**
 * Where a callback route remembers the webhook-ids it handled. Redial sends every attempt of one
 * delivery with the same webhook-id, so a delivery whose answer was lost (a timeout, a restart) comes
 * again; the route acts on it once.
 *
 * A shared implementation (a table with the id as its primary key, a Redis SET NX) must make
 * `begin` atomic, and should let a `handling` claim expire after a while (a few times the handler's
 * longest run), so that a claim left by a process that died is taken over by the next delivery.
 */
export interface RedialCallbackStore {
  /** Claims `id` when it is new; says what it found. */
  begin(id: string): Promise<CallbackClaim>;
  /** The handler succeeded: `id` is handled, and a later delivery of it is not acted on. */
  finish(id: string): Promise<void>;
  /** The handler failed: the claim is dropped, so that the delivery Redial retries runs it again. */
  abandon(id: string): Promise<void>;
}

export interface InMemoryRedialCallbackStoreOptions {
  /** How long a handled id is remembered, in milliseconds; default 24 h. */
  rememberMs?: number;
  /** How many handled ids are remembered at most (the oldest are forgotten first); default 100,000. */
  maxIds?: number;
  /** The clock, for tests; default Date.now. */
  now?: () => number;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The default store: this process's memory. It forgets on a restart, and each instance of an
 * application remembers its own ids; give RedialModule a shared store when either matters.
 */
export class InMemoryRedialCallbackStore implements RedialCallbackStore {
  private readonly rememberMs: number;
  private readonly maxIds: number;
  private readonly now: () => number;
  /** Ids being handled now. */
  private readonly handling = new Set<string>();
  /** Handled ids and when, oldest first (a Map keeps insertion order). */
  private readonly handled = new Map<string, number>();

  constructor(options: InMemoryRedialCallbackStoreOptions = {}) {
    this.rememberMs = options.rememberMs ?? DAY_MS;
    this.maxIds = options.maxIds ?? 100_000;
    this.now = options.now ?? Date.now;
  }

  async begin(id: string): Promise<CallbackClaim> {
    this.forgetOld();
    if (this.handled.has(id)) return "handled";
    if (this.handling.has(id)) return "handling";
    this.handling.add(id);
    return "new";
  }

  async finish(id: string): Promise<void> {
    this.handling.delete(id);
    this.handled.delete(id);
    this.handled.set(id, this.now());
    this.forgetOld();
  }

  async abandon(id: string): Promise<void> {
    this.handling.delete(id);
  }

  private forgetOld(): void {
    const oldest = this.now() - this.rememberMs;
    for (const [id, at] of this.handled) {
      if (at > oldest && this.handled.size <= this.maxIds) break;
      this.handled.delete(id);
    }
  }
}
