//! Reconcilers and the runner that schedules them.
//!
//! A reconciler declares the kinds it reads; the runner runs it when one of them changed
//! (coalesced: however many events arrived since, one run), telling it which keys changed
//! since its last successful run, or "everything" on its first run, on a resync and after
//! an error. One reconciler failing is reported (metrics, log, /readyz, `weft status`) and
//! retried with backoff; the others keep running. A reconciler may name others that must
//! have succeeded before it runs (`after`): the conflist is written only once the node is
//! programmed. Reconcilers run in the order they were added, so dependents come later.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::{Duration, Instant};

use weft_model::{Changed, Generation, KindId, Stores, Watched};

use super::apply::Changes;
use super::metrics::ReconcilerMetrics;

/// One part of the node the agent keeps in line with the stores.
pub trait Reconciler<E> {
    /// Stable name: metrics label, log field, `after` references.
    fn name(&self) -> &'static str;
    /// The kinds it reads: it runs when one changes, and only once all have synced.
    fn reads(&self) -> Vec<KindId>;
    /// Reconcilers that must have succeeded (on their latest run) before this one runs.
    fn after(&self) -> &'static [&'static str] {
        &[]
    }
    /// Runs again whenever some reconciler's health changes (readiness does).
    fn watches_health(&self) -> bool {
        false
    }
    /// Brings its part of the node in line. Must be idempotent: an unchanged node costs
    /// reads only and reports no changes.
    fn reconcile(&mut self, env: &mut E, input: &Input<'_>) -> anyhow::Result<Changes>;
}

/// What a reconciler is told on a run.
pub struct Input<'a> {
    pub stores: &'a Stores,
    pub health: &'a Health,
    changed: Vec<(KindId, Changed)>,
}

static ALL: Changed = Changed::All;

impl Input<'_> {
    /// What changed in `T`'s store since this reconciler's last successful run (`All` for a
    /// kind it does not declare).
    pub fn changed<T: Watched>(&self) -> &Changed {
        self.changed_id(KindId::of::<T>())
    }

    pub fn changed_id(&self, id: KindId) -> &Changed {
        self.changed
            .iter()
            .find(|(k, _)| *k == id)
            .map(|(_, c)| c)
            .unwrap_or(&ALL)
    }

    /// Whether this run must consider everything.
    pub fn everything(&self) -> bool {
        self.changed.iter().any(|(_, c)| *c == Changed::All)
    }
}

/// A reconciler's state as others (readiness, /readyz, status) see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Has not run yet: waiting for the first list of a kind, or for a dependency.
    Waiting(String),
    Ok,
    Failed(String),
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            State::Waiting(why) => write!(f, "waiting: {why}"),
            State::Ok => f.write_str("ok"),
            State::Failed(error) => write!(f, "failed: {error}"),
        }
    }
}

/// Every reconciler's state, by name.
#[derive(Debug, Clone, Default)]
pub struct Health {
    states: BTreeMap<&'static str, State>,
}

impl Health {
    pub fn state(&self, name: &str) -> Option<&State> {
        self.states.get(name)
    }

    pub fn ok(&self, name: &str) -> bool {
        self.states.get(name) == Some(&State::Ok)
    }

    /// `Ok` when every named reconciler is ok, else the first reason not.
    pub fn all_ok(&self, names: &[&str]) -> Result<(), String> {
        for name in names {
            match self.states.get(name) {
                Some(State::Ok) => {}
                Some(state) => return Err(format!("{name}: {state}")),
                None => return Err(format!("{name}: not configured")),
            }
        }
        Ok(())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &State)> {
        self.states.iter().map(|(k, v)| (*k, v))
    }

    fn set(&mut self, name: &'static str, state: State) -> bool {
        self.states.insert(name, state.clone()) != Some(state)
    }
}

/// Exponential backoff between retries of a failing reconciler.
#[derive(Debug, Clone)]
struct Backoff {
    next: Duration,
}

const BACKOFF_FIRST: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

impl Backoff {
    fn new() -> Backoff {
        Backoff {
            next: BACKOFF_FIRST,
        }
    }

    fn step(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        now
    }
}

struct Entry<E> {
    reconciler: Box<dyn Reconciler<E>>,
    name: &'static str,
    reads: Vec<KindId>,
    after: &'static [&'static str],
    watches_health: bool,
    /// Each read store's generation at the last successful run.
    cursors: HashMap<KindId, Generation>,
    everything: bool,
    backoff: Backoff,
    retry_at: Option<Instant>,
}

/// What one round did.
#[derive(Debug, Default)]
pub struct Round {
    /// Reconcilers that ran.
    pub ran: usize,
    pub changes: Changes,
    /// (reconciler, error) of every failure.
    pub failed: Vec<(&'static str, String)>,
    /// A reconciler earlier in the order was triggered: run another round at once.
    pub again: bool,
}

pub struct Runner<E> {
    entries: Vec<Entry<E>>,
    health: Health,
    metrics: ReconcilerMetrics,
}

impl<E> Runner<E> {
    pub fn new(metrics: ReconcilerMetrics) -> Runner<E> {
        Runner {
            entries: Vec::new(),
            health: Health::default(),
            metrics,
        }
    }

    /// Adds a reconciler after the others. Its `after` names must already be added, and the
    /// kinds it reads must have stores.
    pub fn add(
        &mut self,
        stores: &Stores,
        reconciler: impl Reconciler<E> + 'static,
    ) -> anyhow::Result<()> {
        let name = reconciler.name();
        anyhow::ensure!(
            self.entries.iter().all(|e| e.name != name),
            "reconciler {name} added twice"
        );
        for dep in reconciler.after() {
            anyhow::ensure!(
                self.entries.iter().any(|e| e.name == *dep),
                "reconciler {name} runs after {dep}, which is not added before it"
            );
        }
        let reads = reconciler.reads();
        for kind in &reads {
            anyhow::ensure!(
                stores.contains(*kind),
                "reconciler {name} reads {}, which has no store",
                kind.kind()
            );
        }
        self.health
            .set(name, State::Waiting("has not run yet".into()));
        self.entries.push(Entry {
            name,
            after: reconciler.after(),
            watches_health: reconciler.watches_health(),
            reads,
            reconciler: Box::new(reconciler),
            cursors: HashMap::new(),
            everything: true,
            backoff: Backoff::new(),
            retry_at: None,
        });
        Ok(())
    }

    pub fn health(&self) -> &Health {
        &self.health
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.entries.iter().map(|e| e.name).collect()
    }

    /// Every reconciler considers everything on its next run (the periodic resync).
    pub fn resync(&mut self) {
        for entry in &mut self.entries {
            entry.everything = true;
        }
    }

    /// When the earliest backed-off reconciler may retry.
    pub fn next_retry(&self) -> Option<Instant> {
        self.entries.iter().filter_map(|e| e.retry_at).min()
    }

    /// Runs every reconciler that is due, in order.
    pub fn run_round(&mut self, env: &mut E, stores: &Stores, now: Instant) -> Round {
        let mut round = Round::default();
        for i in 0..self.entries.len() {
            let entry = &mut self.entries[i];
            if let Some(kind) = entry
                .reads
                .iter()
                .find(|k| !stores.by_id(**k).is_some_and(|s| s.synced()))
            {
                if !self.health.ok(entry.name) {
                    self.health.set(
                        entry.name,
                        State::Waiting(format!("the first list of {}", kind.kind())),
                    );
                }
                continue;
            }
            if entry.retry_at.is_some_and(|at| now < at) {
                continue;
            }
            if let Some(dep) = entry.after.iter().find(|d| !self.health.ok(d)) {
                if !matches!(
                    self.health.state(entry.name),
                    Some(State::Ok | State::Failed(_))
                ) {
                    self.health
                        .set(entry.name, State::Waiting(format!("{dep} to succeed")));
                }
                continue;
            }
            let changed: Vec<(KindId, Changed)> = entry
                .reads
                .iter()
                .map(|k| {
                    let store = stores.by_id(*k).expect("checked when added");
                    let c = if entry.everything {
                        Changed::All
                    } else {
                        store.changes_since(entry.cursors.get(k).copied())
                    };
                    (*k, c)
                })
                .collect();
            if !entry.everything && changed.iter().all(|(_, c)| c.is_empty()) {
                continue;
            }
            let generations: Vec<(KindId, Generation)> = entry
                .reads
                .iter()
                .map(|k| (*k, stores.by_id(*k).map_or(0, |s| s.generation())))
                .collect();

            let input = Input {
                stores,
                health: &self.health,
                changed,
            };
            let started = Instant::now();
            let result = entry.reconciler.reconcile(env, &input);
            let elapsed = started.elapsed();
            round.ran += 1;
            let was_ok = self.health.ok(entry.name);
            let name = entry.name;
            let health_changed = match result {
                Ok(changes) => {
                    self.metrics.ran(name, elapsed, Ok(changes.total()));
                    entry.cursors = generations.into_iter().collect();
                    entry.everything = false;
                    entry.backoff = Backoff::new();
                    entry.retry_at = None;
                    round.changes.merge(changes);
                    if changes.total() > 0 || !was_ok {
                        // Whatever builds on this part of the node looks again.
                        for later in &mut self.entries[i + 1..] {
                            if later.after.contains(&name) {
                                later.everything = true;
                            }
                        }
                    }
                    self.health.set(name, State::Ok)
                }
                Err(e) => {
                    let error = format!("{e:#}");
                    self.metrics.ran(name, elapsed, Err(()));
                    entry.everything = true;
                    entry.retry_at = Some(now + entry.backoff.step());
                    round.failed.push((name, error.clone()));
                    self.health.set(name, State::Failed(error))
                }
            };
            self.metrics.set_healthy(name, self.health.ok(name));
            if health_changed {
                for (j, other) in self.entries.iter_mut().enumerate() {
                    if other.watches_health && j != i {
                        other.everything = true;
                        round.again |= j < i;
                    }
                }
            }
        }
        round
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;
    use weft_model::{Labels, Namespace as Thing, ObjectKey, Update};

    type Log = Rc<RefCell<Vec<String>>>;

    struct Probe {
        name: &'static str,
        reads: Vec<KindId>,
        after: &'static [&'static str],
        fail: Rc<RefCell<bool>>,
        log: Log,
    }

    impl Reconciler<()> for Probe {
        fn name(&self) -> &'static str {
            self.name
        }
        fn reads(&self) -> Vec<KindId> {
            self.reads.clone()
        }
        fn after(&self) -> &'static [&'static str] {
            self.after
        }
        fn reconcile(&mut self, _: &mut (), input: &Input<'_>) -> anyhow::Result<Changes> {
            let seen = match input.changed::<Thing>() {
                Changed::All => "all".to_string(),
                Changed::Keys(keys) => keys
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            };
            self.log.borrow_mut().push(format!("{}:{seen}", self.name));
            anyhow::ensure!(!*self.fail.borrow(), "broken");
            Ok(Changes::default())
        }
    }

    fn stores() -> Stores {
        let mut stores = Stores::default();
        stores.register::<Thing>();
        stores
    }

    fn set(stores: &mut Stores, name: &str, v: u32) {
        let labels = [("v".to_string(), v.to_string())].into_iter().collect();
        let thing = Thing {
            labels: Labels::new(&labels),
        };
        stores
            .get_mut::<Thing>()
            .unwrap()
            .apply(Update::Apply(ObjectKey::cluster(name), Ok(thing)));
    }

    fn sync(stores: &mut Stores) {
        let store = stores.get_mut::<Thing>().unwrap();
        store.apply(Update::Init);
        store.apply(Update::InitDone);
    }

    #[test]
    fn runs_after_sync_with_changed_keys_and_failures_stay_local() {
        let mut stores = stores();
        let log: Log = Rc::default();
        let broken = Rc::new(RefCell::new(false));
        let mut runner = Runner::<()>::new(ReconcilerMetrics::default());
        let probe = |name, after, fail: &Rc<RefCell<bool>>| Probe {
            name,
            reads: vec![KindId::of::<Thing>()],
            after,
            fail: fail.clone(),
            log: log.clone(),
        };
        runner
            .add(&stores, probe("a", &[], &Rc::new(RefCell::new(false))))
            .unwrap();
        runner.add(&stores, probe("b", &[], &broken)).unwrap();
        runner
            .add(&stores, probe("c", &["b"], &Rc::new(RefCell::new(false))))
            .unwrap();
        let t0 = Instant::now();

        // Nothing runs before the first list.
        assert_eq!(runner.run_round(&mut (), &stores, t0).ran, 0);
        assert!(matches!(
            runner.health().state("a"),
            Some(State::Waiting(_))
        ));
        sync(&mut stores);
        runner.run_round(&mut (), &stores, t0);
        assert_eq!(*log.borrow(), ["a:all", "b:all", "c:all"]);
        log.borrow_mut().clear();

        // Two events, one run each, told which key changed.
        set(&mut stores, "x", 1);
        set(&mut stores, "x", 2);
        runner.run_round(&mut (), &stores, t0);
        assert_eq!(*log.borrow(), ["a:x", "b:x", "c:x"]);
        log.borrow_mut().clear();
        assert_eq!(
            runner.run_round(&mut (), &stores, t0).ran,
            0,
            "nothing changed"
        );

        // b breaks: a keeps running, c waits, b retries after its backoff with everything.
        *broken.borrow_mut() = true;
        set(&mut stores, "y", 1);
        let round = runner.run_round(&mut (), &stores, t0);
        assert_eq!(round.failed.len(), 1);
        assert_eq!(*log.borrow(), ["a:y", "b:y"]);
        assert_eq!(runner.health().all_ok(&["a"]), Ok(()));
        assert!(runner
            .health()
            .all_ok(&["a", "b"])
            .unwrap_err()
            .contains("broken"));
        log.borrow_mut().clear();
        set(&mut stores, "z", 1);
        runner.run_round(&mut (), &stores, t0);
        assert_eq!(*log.borrow(), ["a:z"], "b backs off, c waits for b");
        log.borrow_mut().clear();
        *broken.borrow_mut() = false;
        let retry = runner.next_retry().unwrap();
        runner.run_round(&mut (), &stores, retry);
        assert_eq!(
            *log.borrow(),
            ["b:all", "c:all"],
            "b recovered, so c looks at everything"
        );
        log.borrow_mut().clear();

        runner.resync();
        runner.run_round(&mut (), &stores, retry);
        assert_eq!(*log.borrow(), ["a:all", "b:all", "c:all"]);
    }

    #[test]
    fn adding_checks_dependencies_and_stores() {
        let stores = stores();
        let mut runner = Runner::<()>::new(ReconcilerMetrics::default());
        let log: Log = Rc::default();
        let fail = Rc::new(RefCell::new(false));
        let orphan = Probe {
            name: "late",
            reads: vec![],
            after: &["missing"],
            fail: fail.clone(),
            log: log.clone(),
        };
        assert!(runner.add(&stores, orphan).is_err());
        let unknown = Probe {
            name: "reads-nothing-registered",
            reads: vec![KindId::of::<weft_model::Pod>()],
            after: &[],
            fail,
            log,
        };
        assert!(runner.add(&stores, unknown).is_err());
    }
}
