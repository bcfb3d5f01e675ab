//! The engine's view of every endpoint: its protection state (from the policy core), how many of
//! its attempts are in flight here, and persistence of that state through the store.
//!
//! Over 600 lines: the registry's state, its persistence and its sharing among nodes, all over the
//! same map and lock.

use crate::clock::Clock;
use redial_policy::endpoint::{
    Admission, BreakerState, EndpointConfig, EndpointState, EndpointView, Finished, Observed,
    Permit, Share, SharedHolds,
};
use redial_policy::Timestamp;
use redial_store::{Control, EndpointRecord, EventKind, NewEvent, SharedHold};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Endpoint limits and the policy override of one endpoint, as configured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndpointSettings {
    pub policy: Option<redial_policy::PolicyOverride>,
    pub limits: EndpointConfig,
}

#[derive(Debug, Default)]
struct Entry {
    state: EndpointState,
    in_flight: u32,
    /// Changed since it was last saved.
    dirty: bool,
    /// The ends of the pause, of the open breaker and of the learned pace as the shared store
    /// last knew them (what this node published or took in), so that only changes are published.
    shared: (Option<Timestamp>, Option<Timestamp>, Option<Timestamp>),
    /// Whether it was paused, its breaker open, and it quarantined when the event log was last
    /// told ([`Registry::announce`]); `None` after a restart, until the first look.
    announced: Option<(bool, bool, bool)>,
    /// When a job of it was last admitted or answered, or a control named it (after a restart,
    /// when its state was last saved): an endpoint unseen long enough, with nothing held, is
    /// forgotten ([`Registry::forgettable`]).
    last_seen: Option<Timestamp>,
    /// How long its attempts take here, from admission to answer, in milliseconds: a moving
    /// average (each answer weighs a fifth), for forecasts. Not saved.
    attempt_ms: Option<f64>,
}

#[derive(Debug)]
pub(crate) struct Registry {
    defaults: EndpointConfig,
    settings: BTreeMap<String, EndpointSettings>,
    /// Held only for short, synchronous updates; never across an await.
    entries: Mutex<HashMap<String, Entry>>,
    metrics: Arc<crate::metrics::Metrics>,
    /// For releases, which happen where no clock is at hand (a guard dropped).
    clock: Arc<dyn Clock>,
    /// This node's rank among the nodes sharing the store (high 32 bits) and their number (low
    /// 32 bits): every endpoint's limits are divided by them. 0 of 1 alone.
    cluster: AtomicU64,
    /// Set when a pause or a breaker may have changed: the engine tells the event log at once
    /// ([`Registry::announce`]) rather than at its next maintenance tick.
    announce_due: std::sync::atomic::AtomicBool,
}

/// An admission in force: the job's place among its endpoint's attempts in flight and the permit
/// its state handed out (a probe slot, a retry in flight). It ends exactly once: with the
/// attempt's result ([`Admitted::finish`]), or, dropped on any other path (given back unstarted,
/// a store error, a panic, an abort at shutdown), with a release.
#[derive(Debug)]
pub(crate) struct Admitted {
    registry: Arc<Registry>,
    endpoint: String,
    /// Taken when the admission ends, so it ends once.
    permit: Option<Permit>,
    /// The admission of the job's group (its own limits), which ends with this one.
    group: Option<Box<Admitted>>,
}

impl Admitted {
    /// Ends the admission with the attempt's result; `observed.others_in_flight` is filled in.
    /// `took` is the attempt's own time, from its start to its answer: not the time it waited
    /// for a run slot after its admission, which is the engine's, not the endpoint's (the
    /// forecast's attempt time, issue 54). The group's admission ends as a plain success: a
    /// group learns nothing from answers, it only counts what it started. Returns, for a bare
    /// 429 from an endpoint that keeps a pace learned from them, when the refused job may go
    /// again at that pace.
    pub fn finish(
        mut self,
        now: Timestamp,
        observed: Observed,
        took: std::time::Duration,
    ) -> Finished {
        let mut finished = Finished::default();
        if let Some(permit) = self.permit.take() {
            finished = self
                .registry
                .finish(&self.endpoint, now, permit, observed, took);
        }
        if let Some(mut group) = self.group.take() {
            if let Some(permit) = group.permit.take() {
                let plain = Observed {
                    class: redial_policy::endpoint::ResultClass::Success,
                    overload: false,
                    rate_limited: false,
                    unavailable: false,
                    server_wait: None,
                    quota: Default::default(),
                    others_in_flight: 0,
                    safe_retry: false,
                    job: None,
                };
                group
                    .registry
                    .finish(&group.endpoint, now, permit, plain, took);
            }
        }
        finished
    }

    /// Carries the job's group admission along with this one.
    pub fn with_group(mut self, group: Option<Admitted>) -> Admitted {
        self.group = group.map(Box::new);
        self
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(permit) = self.permit.take() {
            self.registry.release(&self.endpoint, permit);
        }
    }
}

impl Registry {
    pub fn new(
        defaults: EndpointConfig,
        settings: BTreeMap<String, EndpointSettings>,
        metrics: Arc<crate::metrics::Metrics>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Registry {
            defaults,
            settings,
            entries: Mutex::new(HashMap::new()),
            metrics,
            clock,
            cluster: AtomicU64::new(1),
            announce_due: Default::default(),
        }
    }

    /// This node's rank among the nodes and their number.
    pub fn cluster(&self) -> (u32, u32) {
        let v = self.cluster.load(Ordering::SeqCst);
        ((v >> 32) as u32, (v as u32).max(1))
    }

    /// The share of `endpoint`'s limits this node keeps.
    fn share_of(&self, endpoint: &str) -> Share {
        let (rank, of) = self.cluster();
        Share::for_endpoint(rank, of, endpoint)
    }

    /// The entry of `endpoint`, made with this node's share if new.
    fn entry<'a>(&self, entries: &'a mut HashMap<String, Entry>, endpoint: &str) -> &'a mut Entry {
        entries.entry(endpoint.to_owned()).or_insert_with(|| {
            let mut e = Entry {
                announced: Some((false, false, false)),
                last_seen: Some(self.clock.now()),
                ..Entry::default()
            };
            e.state.set_share(self.share_of(endpoint));
            e
        })
    }

    /// Sets this node's rank among `of` nodes; every endpoint takes its new part of its limits.
    /// Returns whether anything changed.
    pub fn set_cluster(&self, rank: u32, of: u32) -> bool {
        let of = of.max(1);
        let v = (u64::from(rank % of) << 32) | u64::from(of);
        if self.cluster.swap(v, Ordering::SeqCst) == v {
            return false;
        }
        let mut entries = self.lock();
        for (name, e) in entries.iter_mut() {
            e.state.set_share(Share::for_endpoint(rank, of, name));
        }
        true
    }

    /// Counts a breaker transition, if `before` and `after` differ.
    fn count_transition(&self, endpoint: &str, before: &'static str, after: &'static str) {
        if before != after {
            let label = self.metrics.endpoint_label(endpoint);
            self.metrics.inc(
                &crate::metrics::BREAKER_TRANSITIONS,
                &[("endpoint", &label), ("to", after)],
            );
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        // Entries are plain values updated in one step each; a panic cannot leave one half-done.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn config(&self, endpoint: &str) -> &EndpointConfig {
        self.settings
            .get(endpoint)
            .map_or(&self.defaults, |s| &s.limits)
    }

    pub fn policy_override(&self, endpoint: &str) -> Option<&redial_policy::PolicyOverride> {
        self.settings.get(endpoint).and_then(|s| s.policy.as_ref())
    }

    /// Restores saved states; a record that no longer parses is dropped with a warning.
    pub fn load(&self, records: Vec<EndpointRecord>) {
        let mut entries = self.lock();
        for r in records {
            match serde_json::from_str::<EndpointState>(&r.state) {
                Ok(mut state) => {
                    state.set_share(self.share_of(&r.name));
                    entries.insert(
                        r.name,
                        Entry {
                            state,
                            in_flight: 0,
                            dirty: false,
                            shared: (None, None, None),
                            announced: None,
                            last_seen: Some(r.updated_at),
                            attempt_ms: None,
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(endpoint = %r.name, error = %e, "dropping an unreadable saved endpoint state")
                }
            }
        }
    }

    /// Asks whether a job of `endpoint` may start now. Admitted, it is counted in flight until
    /// the returned admission ends; otherwise the hold is returned and nothing is counted.
    pub fn admit(
        self: &Arc<Self>,
        endpoint: &str,
        is_retry: bool,
        now: Timestamp,
    ) -> Result<Admitted, Admission> {
        let cfg = self.config(endpoint);
        let mut entries = self.lock();
        let e = self.entry(&mut entries, endpoint);
        e.last_seen = Some(now);
        let before = e.state.breaker.name();
        let a = e.state.admit(cfg, now, is_retry, e.in_flight);
        if a.is_go() {
            e.in_flight += 1;
        }
        e.dirty = true;
        let after = e.state.breaker.name();
        drop(entries);
        self.count_transition(endpoint, before, after);
        match a {
            Admission::Go(permit) => Ok(Admitted {
                registry: self.clone(),
                endpoint: endpoint.to_owned(),
                permit: Some(permit),
                group: None,
            }),
            held => Err(held),
        }
    }

    /// Attempts of `name` in flight here.
    pub fn in_flight(&self, name: &str) -> u32 {
        self.lock().get(name).map_or(0, |e| e.in_flight)
    }

    /// What stops every job of `endpoint` now (a pause, an open breaker), if anything.
    pub fn stopped_by(&self, endpoint: &str, now: Timestamp) -> Option<String> {
        self.lock().get(endpoint)?.state.stopped_by(now)
    }

    /// Undoes an admission whose attempt did not run, or whose result will not come.
    fn release(&self, endpoint: &str, permit: Permit) {
        let cfg = self.config(endpoint);
        let now = self.clock.now();
        let mut entries = self.lock();
        if let Some(e) = entries.get_mut(endpoint) {
            e.in_flight = e.in_flight.saturating_sub(1);
            e.state.release(cfg, now, permit);
            e.dirty = true;
        }
    }

    /// Records a finished attempt; `observed.others_in_flight` is filled in here.
    /// Returns what the endpoint asks of the job besides its decision: for a bare 429, to go
    /// again at the endpoint's learned pace, if it keeps one; for the failure that made it
    /// suspect, to retry at once.
    fn finish(
        &self,
        endpoint: &str,
        now: Timestamp,
        permit: Permit,
        mut observed: Observed,
        took: std::time::Duration,
    ) -> Finished {
        let cfg = self.config(endpoint);
        let mut entries = self.lock();
        let e = self.entry(&mut entries, endpoint);
        e.last_seen = Some(now);
        let ms = took.as_secs_f64() * 1000.0;
        e.attempt_ms = Some(e.attempt_ms.map_or(ms, |avg| avg + (ms - avg) / 5.0));
        e.in_flight = e.in_flight.saturating_sub(1);
        observed.others_in_flight = e.in_flight;
        let before = e.state.breaker.name();
        let paused_before = e.state.paused_until;
        let finished = e.state.finish(cfg, now, permit, &observed);
        e.dirty = true;
        let after = e.state.breaker.name();
        if before != after || paused_before != e.state.paused_until {
            self.announce_due.store(true, Ordering::Relaxed);
        }
        drop(entries);
        self.count_transition(endpoint, before, after);
        finished
    }

    /// What held a job of `endpoint` that was due at `run_at`, if something did.
    pub fn held_by(&self, endpoint: &str, run_at: Timestamp) -> Option<String> {
        let entries = self.lock();
        let (reason, ended) = entries.get(endpoint)?.state.last_hold.clone()?;
        (run_at < ended).then_some(reason)
    }

    /// The earliest instant after `now` at which some endpoint's hold changes.
    pub fn next_change(&self, now: Timestamp) -> Option<Timestamp> {
        self.lock()
            .values()
            .filter_map(|e| e.state.next_change(now))
            .min()
    }

    /// Endpoints that hold all their jobs now, with why.
    pub fn holds(&self, now: Timestamp) -> Vec<(String, String)> {
        self.lock()
            .iter()
            .filter_map(|(name, e)| {
                let why = e.state.describe(self.config(name), now, e.in_flight)?;
                Some((name.clone(), why))
            })
            .collect()
    }

    /// Views of every known endpoint, of every configured one, and of those in `also`.
    pub fn views(&self, now: Timestamp, also: &[String]) -> BTreeMap<String, EndpointView> {
        let entries = self.lock();
        let mut out = BTreeMap::new();
        for name in entries.keys().chain(self.settings.keys()).chain(also) {
            let view = match entries.get(name) {
                Some(e) => e.state.clone().view(self.config(name), now, e.in_flight),
                None => {
                    let mut state = EndpointState::default();
                    state.set_share(self.share_of(name));
                    state.view(self.config(name), now, 0)
                }
            };
            out.insert(name.clone(), view);
        }
        out
    }

    /// Holds in force here that the other nodes do not know of yet.
    pub fn holds_to_share(&self, now: Timestamp) -> Vec<SharedHold> {
        let mut entries = self.lock();
        let mut out = Vec::new();
        for (name, e) in entries.iter_mut() {
            let h = e.state.shareable(now);
            let ends = (
                h.pause.as_ref().map(|(t, _)| *t),
                h.breaker.as_ref().map(|(t, _)| *t),
                h.paced_until,
            );
            let newer = |mine: Option<Timestamp>, known: Option<Timestamp>| {
                mine.is_some_and(|m| known.is_none_or(|k| m > k))
            };
            if newer(ends.0, e.shared.0) || newer(ends.1, e.shared.1) || newer(ends.2, e.shared.2) {
                e.shared = ends;
                let (pause, pause_reason) = h.pause.unzip();
                let (breaker, breaker_reason) = h.breaker.unzip();
                out.push(SharedHold {
                    endpoint: name.clone(),
                    paused_until: pause,
                    pause_reason,
                    breaker_until: breaker,
                    breaker_reason,
                    paced_until: h.paced_until,
                });
            }
        }
        out
    }

    /// Takes in the holds shared by every node; returns whether any hold here changed.
    pub fn absorb(&self, holds: Vec<SharedHold>, now: Timestamp) -> bool {
        let mut entries = self.lock();
        let mut changed = false;
        let mut transitions = Vec::new();
        for h in holds {
            let e = self.entry(&mut entries, &h.endpoint);
            let before = e.state.shareable(now);
            // What the store holds now; a longer hold of our own is still to publish.
            e.shared = (h.paused_until, h.breaker_until, h.paced_until);
            let breaker_before = e.state.breaker.name();
            e.state.absorb(
                now,
                &SharedHolds {
                    pause: h.paused_until.zip(h.pause_reason.or(Some(String::new()))),
                    breaker: h
                        .breaker_until
                        .zip(h.breaker_reason.or(Some(String::new()))),
                    paced_until: h.paced_until,
                },
            );
            let breaker_after = e.state.breaker.name();
            if breaker_before != breaker_after {
                transitions.push((h.endpoint.clone(), breaker_before, breaker_after));
            }
            if before != e.state.shareable(now) {
                e.dirty = true;
                changed = true;
                self.announce_due.store(true, Ordering::Relaxed);
            }
        }
        drop(entries);
        for (endpoint, before, after) in transitions {
            self.count_transition(&endpoint, before, after);
        }
        changed
    }

    /// Forgets what was published, so that everything in force is published again (after a
    /// failed publication).
    pub fn reshare(&self) {
        for e in self.lock().values_mut() {
            e.shared = (None, None, None);
        }
    }

    /// The states changed since the last call, to save.
    pub fn take_dirty(&self, now: Timestamp) -> Vec<EndpointRecord> {
        let mut entries = self.lock();
        let mut out = Vec::new();
        for (name, e) in entries.iter_mut().filter(|(_, e)| e.dirty) {
            match serde_json::to_string(&e.state) {
                Ok(state) => {
                    out.push(EndpointRecord {
                        name: name.clone(),
                        state,
                        updated_at: now,
                    });
                    e.dirty = false;
                }
                Err(err) => {
                    tracing::error!(endpoint = %name, error = %err, "cannot serialise endpoint state")
                }
            }
        }
        out
    }

    /// Takes in the endpoints' controls set by hand (the whole list: a hand pause missing from
    /// it is lifted). Returns whether any state changed.
    pub fn apply_controls(&self, controls: &[Control], now: Timestamp) -> bool {
        let by_name: HashMap<&str, &Control> =
            controls.iter().map(|c| (c.name.as_str(), c)).collect();
        let mut entries = self.lock();
        for c in controls {
            self.entry(&mut entries, &c.name);
        }
        let mut changed = false;
        let mut transitions = Vec::new();
        for (name, e) in entries.iter_mut() {
            let control = by_name.get(name.as_str()).copied();
            // Most endpoints have no control and no hand pause: nothing to compare.
            if control.is_none() && e.state.hand_pause.is_none() {
                continue;
            }
            let (did, transition) = self.take_control(name, e, control, now);
            changed |= did;
            transitions.extend(transition.map(|(was, is)| (name.clone(), was, is)));
        }
        drop(entries);
        for (endpoint, before, after) in transitions {
            self.count_transition(&endpoint, before, after);
        }
        changed
    }

    /// Takes in one endpoint's control, just changed on this node: the cost of one entry,
    /// whatever the number of endpoints. Returns whether its state changed.
    pub fn apply_control(&self, control: &Control, now: Timestamp) -> bool {
        let mut entries = self.lock();
        let e = self.entry(&mut entries, &control.name);
        e.last_seen = Some(now);
        let (changed, transition) = self.take_control(&control.name, e, Some(control), now);
        drop(entries);
        if let Some((before, after)) = transition {
            self.count_transition(&control.name, before, after);
        }
        changed
    }

    /// Lays `control` (none: lifted) over an entry's state. Returns whether the state changed,
    /// and the breaker's transition if it made one.
    fn take_control(
        &self,
        name: &str,
        e: &mut Entry,
        control: Option<&Control>,
        now: Timestamp,
    ) -> (bool, Option<(&'static str, &'static str)>) {
        let before = e.state.clone();
        e.state.hand_pause = control.and_then(|c| c.pause.clone());
        if let Some(at) = control.and_then(|c| c.resumed_at) {
            e.state.take_resume(self.config(name), at, now);
        }
        if let Some(at) = control.and_then(|c| c.breaker_reset_at) {
            e.state.take_breaker_reset(at, now);
        }
        // The shared hold a resume or reset ended is gone from the store: the next hold,
        // however short, must be published again.
        if e.state.resumed_at != before.resumed_at {
            e.shared.0 = None;
        }
        if e.state.breaker_reset_at != before.breaker_reset_at {
            e.shared.1 = None;
        }
        if e.state == before {
            return (false, None);
        }
        e.dirty = true;
        self.announce_due.store(true, Ordering::Relaxed);
        let (was, is) = (before.breaker.name(), e.state.breaker.name());
        (true, (was != is).then_some((was, is)))
    }

    /// Whether this node knows `endpoint`: configured, or seen (a job of it ran here, its state
    /// was saved, a control names it).
    pub fn known(&self, endpoint: &str) -> bool {
        self.settings.contains_key(endpoint) || self.lock().contains_key(endpoint)
    }

    /// One endpoint's view (as [`Registry::views`] gives it).
    pub fn view(&self, endpoint: &str, now: Timestamp) -> EndpointView {
        let entries = self.lock();
        match entries.get(endpoint) {
            Some(e) => e
                .state
                .clone()
                .view(self.config(endpoint), now, e.in_flight),
            None => {
                let mut state = EndpointState::default();
                state.set_share(self.share_of(endpoint));
                state.view(self.config(endpoint), now, 0)
            }
        }
    }

    /// The forecast of `endpoint`'s backlog ([`EndpointState::forecast`]), with the attempt
    /// time measured here (`input.attempt_time` is filled in).
    pub fn forecast(
        &self,
        endpoint: &str,
        now: Timestamp,
        mut input: redial_policy::endpoint::ForecastInput<'_>,
    ) -> redial_policy::endpoint::Forecast {
        let cfg = self.config(endpoint);
        let entries = self.lock();
        match entries.get(endpoint) {
            Some(e) => {
                input.attempt_time = e
                    .attempt_ms
                    .map(|ms| std::time::Duration::from_micros((ms * 1000.0) as u64));
                let mut state = e.state.clone();
                drop(entries);
                state.view(cfg, now, 0);
                state.forecast(cfg, now, &input)
            }
            None => {
                drop(entries);
                let mut state = EndpointState::default();
                state.set_share(self.share_of(endpoint));
                state.forecast(cfg, now, &input)
            }
        }
    }

    /// Endpoints that may be forgotten: not configured, unseen since `unseen_since`, nothing in
    /// flight, nothing holding them (no pause, by hand or by answers; breaker closed; not
    /// suspect). The caller checks that no job waits for them, then [`Registry::forget`]s them.
    pub fn forgettable(&self, unseen_since: Timestamp, now: Timestamp) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(name, e)| self.idle_since(name, e, unseen_since, now))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Drops the entries of `names` that are still forgettable (a job may have come since they
    /// were listed); returns those dropped.
    pub fn forget(&self, names: &[String], unseen_since: Timestamp, now: Timestamp) -> Vec<String> {
        let mut entries = self.lock();
        let mut out = Vec::new();
        for name in names {
            if entries
                .get(name)
                .is_some_and(|e| self.idle_since(name, e, unseen_since, now))
            {
                entries.remove(name);
                out.push(name.clone());
            }
        }
        out
    }

    fn idle_since(&self, name: &str, e: &Entry, unseen_since: Timestamp, now: Timestamp) -> bool {
        let s = &e.state;
        !self.settings.contains_key(name)
            && e.in_flight == 0
            && e.last_seen.is_some_and(|t| t < unseen_since)
            && !s.held_as_down()
            && s.hand_pause.as_ref().is_none_or(|p| !p.in_force(now))
            && s.paused_until.is_none_or(|u| u <= now)
    }

    /// The endpoint events since the last call: paused and resumed (by hand or by its answers),
    /// breaker opened (open or probing) and closed. With `tell` false (a node that does not
    /// lead: the leader tells the cluster's, from the shared holds) nothing is returned, but
    /// what is seen is taken as told.
    pub fn announce(&self, now: Timestamp, tell: bool) -> Vec<NewEvent> {
        self.announce_due.store(false, Ordering::Relaxed);
        let mut out = Vec::new();
        let mut entries = self.lock();
        for (name, e) in entries.iter_mut() {
            let s = &e.state;
            let pause = match s.hand_pause.as_ref().filter(|p| p.in_force(now)) {
                Some(p) => Some((p.until, p.reason.clone())),
                None => s
                    .paused_until
                    .filter(|u| now < *u)
                    .map(|u| (Some(u), s.pause_reason.clone().unwrap_or_default())),
            };
            let open = !matches!(s.breaker, BreakerState::Closed);
            let quarantined = s.quarantined().is_some();
            let was = e.announced.replace((pause.is_some(), open, quarantined));
            let Some((was_paused, was_open, was_quarantined)) = was.filter(|_| tell) else {
                continue;
            };
            let event = |kind, reason: Option<String>, until| NewEvent {
                at: now,
                kind,
                endpoint: name.clone(),
                reason,
                until,
            };
            match (was_paused, pause) {
                (false, Some((until, reason))) => {
                    out.push(event(EventKind::EndpointPaused, Some(reason), until))
                }
                (true, None) => out.push(event(EventKind::EndpointResumed, None, None)),
                _ => {}
            }
            if was_open != open {
                if open {
                    let until = match s.breaker {
                        BreakerState::Open { until } => Some(until),
                        _ => None,
                    };
                    let reason = s.breaker_history.back().map(|b| b.reason.clone());
                    out.push(event(EventKind::BreakerOpened, reason, until));
                } else {
                    out.push(event(EventKind::BreakerClosed, None, None));
                }
            }
            match (was_quarantined, quarantined) {
                (false, true) => {
                    let reason = s
                        .breaker_history
                        .iter()
                        .rev()
                        .find(|b| b.to == "quarantined")
                        .map(|b| b.reason.clone());
                    let until = match s.breaker {
                        BreakerState::Open { until } => Some(until),
                        _ => None,
                    };
                    out.push(event(EventKind::EndpointQuarantined, reason, until));
                }
                (true, false) => {
                    let reason = s.breaker_history.back().map(|b| b.reason.clone());
                    out.push(event(EventKind::EndpointRecovered, reason, None));
                }
                _ => {}
            }
        }
        out
    }

    /// Whether a pause or a breaker may have changed since the last [`Registry::announce`].
    pub fn announce_due(&self) -> bool {
        self.announce_due.load(Ordering::Relaxed)
    }

    /// Marks every state to be saved again (after a failed save).
    pub fn mark_dirty(&self, names: &[EndpointRecord]) {
        let mut entries = self.lock();
        for r in names {
            if let Some(e) = entries.get_mut(&r.name) {
                e.dirty = true;
            }
        }
    }
}
