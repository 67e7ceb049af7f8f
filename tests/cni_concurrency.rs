//! Many `weft` plugin processes at once, some SIGKILLed in the middle of ADD (or DEL), then
//! GC with the attachments the test considers live. Afterwards no address may ever have been
//! held by two live attachments, the store must hold exactly the live attachments' addresses,
//! no weft veth but the live ones may exist, and every live pod must still be configured.

mod cni_support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::os::unix::process::ExitStatusExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cni_support::{attachment_env, result_addresses, result_host_veth, Net, Node, Pod, Reply};
use serde_json::Value;

const WORKERS: usize = 8;
const ITERATIONS: usize = 32;
/// Pod namespaces created per worker before the run (more are made if it needs them).
const PODS_PER_WORKER: usize = 12;
/// One ADD in KILL_ADD_ONE_IN is SIGKILLed after a random 0-8 ms.
const KILL_ADD_ONE_IN: u64 = 4;
/// One DEL in KILL_DEL_ONE_IN is SIGKILLed likewise.
const KILL_DEL_ONE_IN: u64 = 10;
/// One completed ADD in KEEP_ONE_IN stays live to the end instead of being deleted.
const KEEP_ONE_IN: u64 = 5;

/// xorshift64*: reproducible from the printed seed, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
}

fn seed() -> u64 {
    std::env::var("WEFT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1);
            nanos | 1
        })
}

/// An attachment whose last operation was a completed ADD.
#[derive(Debug, Clone)]
struct Live {
    id: String,
    ifname: String,
    worker: usize,
    pod: usize,
    result: Value,
}

#[derive(Debug, Default)]
struct Tally {
    adds: u64,
    adds_killed: u64,
    dels: u64,
    dels_killed: u64,
    errors: Vec<String>,
    /// Address -> the live attachment holding it, kept while the run goes on.
    holders: BTreeMap<IpAddr, String>,
    /// Times an address was handed to an attachment while another live one held it.
    double_grants: Vec<String>,
    live: Vec<Live>,
}

enum Outcome {
    Completed(Reply),
    Killed,
}

/// Runs the plugin; with `kill_after` set, SIGKILLs it after that delay (it may have finished
/// by then, which counts as completed).
fn run(node: &Node, env: &[(&str, &str)], stdin: &[u8], kill_after: Option<Duration>) -> Outcome {
    let mut child = node.spawn(env, stdin);
    if let Some(delay) = kill_after {
        std::thread::sleep(delay);
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("wait for the plugin");
    if out.status.signal() == Some(libc::SIGKILL) {
        return Outcome::Killed;
    }
    Outcome::Completed(Reply {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// One worker's pods. A pod namespace holds one attachment at a time (each ADD adds the
/// default routes), so a pod whose attachment stays live, or may have left an interface
/// behind (a killed ADD not followed by DEL, a killed DEL), is set aside until the end and
/// the worker moves to a fresh one.
struct Pods {
    pods: Vec<Pod>,
    current: usize,
}

impl Pods {
    fn new(n: usize) -> Pods {
        Pods {
            pods: (0..n).map(|_| Pod::new("cc")).collect(),
            current: 0,
        }
    }

    fn set_aside_current(&mut self) {
        self.current += 1;
        if self.current == self.pods.len() {
            self.pods.push(Pod::new("cc"));
        }
    }
}

fn worker(net: &Net, mut pods: Pods, w: usize, seed: u64, tally: &Mutex<Tally>) -> Pods {
    let mut rng = Rng((seed ^ (w as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
    let lock = || tally.lock().unwrap_or_else(|e| e.into_inner());
    for i in 0..ITERATIONS {
        let pod_index = pods.current;
        let netns = pods.pods[pod_index].netns();
        let id = format!("cc{w}x{i}");
        let ifname = "eth0".to_string();
        let key = format!("{id}@{ifname}");

        let kill = rng
            .one_in(KILL_ADD_ONE_IN)
            .then(|| Duration::from_micros(rng.next() % 8001));
        let env = attachment_env("ADD", &id, &ifname, &netns);
        match run(net.node, &env, &net.bytes(), kill) {
            Outcome::Killed => {
                lock().adds_killed += 1;
                // Like a runtime after a timed-out ADD, sometimes DEL; else leave it to GC.
                if rng.one_in(2) {
                    let env = attachment_env("DEL", &id, &ifname, &netns);
                    match run(net.node, &env, &net.bytes(), None) {
                        Outcome::Completed(r) if r.success() => lock().dels += 1,
                        Outcome::Completed(r) => {
                            lock()
                                .errors
                                .push(format!("DEL after killed ADD of {key}: {r:?}"));
                            pods.set_aside_current();
                        }
                        Outcome::Killed => lock().errors.push(format!("{key}: DEL killed unasked")),
                    }
                } else {
                    pods.set_aside_current();
                }
                continue;
            }
            Outcome::Completed(reply) if !reply.success() => {
                let mut t = lock();
                t.adds += 1;
                t.errors.push(format!("ADD {key}: {reply:?}"));
                pods.set_aside_current();
                continue;
            }
            Outcome::Completed(reply) => {
                let result = reply.json();
                let mut t = lock();
                t.adds += 1;
                for addr in result_addresses(&result) {
                    if let Some(holder) = t.holders.insert(addr, key.clone()) {
                        t.double_grants
                            .push(format!("{addr} given to {key} while {holder} held it"));
                    }
                }
                t.live.push(Live {
                    id: id.clone(),
                    ifname: ifname.clone(),
                    worker: w,
                    pod: pod_index,
                    result,
                });
            }
        }

        if rng.one_in(KEEP_ONE_IN) {
            pods.set_aside_current();
            continue;
        }
        // From here on the attachment is not live: forget it before DEL releases anything.
        let prev = {
            let mut t = lock();
            t.holders.retain(|_, holder| *holder != key);
            let at = t.live.iter().position(|l| l.id == id && l.ifname == ifname);
            at.map(|at| t.live.swap_remove(at).result)
        };
        let kill = rng
            .one_in(KILL_DEL_ONE_IN)
            .then(|| Duration::from_micros(rng.next() % 8001));
        let env = attachment_env("DEL", &id, &ifname, &netns);
        let stdin = match &prev {
            Some(prev) => net.with_prev(prev),
            None => net.bytes(),
        };
        match run(net.node, &env, &stdin, kill) {
            Outcome::Killed => {
                lock().dels_killed += 1;
                pods.set_aside_current();
            }
            Outcome::Completed(r) if r.success() => lock().dels += 1,
            Outcome::Completed(r) => {
                let mut t = lock();
                t.dels += 1;
                t.errors.push(format!("DEL {key}: {r:?}"));
                pods.set_aside_current();
            }
        }
    }
    pods
}

#[test]
fn parallel_add_del_with_kills_then_gc() {
    let started = Instant::now();
    let seed = seed();
    println!("seed {seed} (set WEFT_TEST_SEED to replay)");
    let node = Node::new("cc");
    let net = Net::dual(&node, "weftcc", 50);
    let tally = Mutex::new(Tally::default());

    let barrier = std::sync::Barrier::new(WORKERS);
    let pods: Vec<Vec<Pod>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (net, tally, barrier) = (&net, &tally, &barrier);
                scope.spawn(move || {
                    let pods = Pods::new(PODS_PER_WORKER);
                    // All start together, so the very first ADDs also race to create the
                    // store.
                    barrier.wait();
                    worker(net, pods, w, seed, tally).pods
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    let setup_and_run = started.elapsed();
    let t = tally.into_inner().unwrap_or_else(|e| e.into_inner());
    let ops = t.adds + t.adds_killed + t.dels + t.dels_killed;
    println!(
        "{ops} operations ({WORKERS} workers, pods included) in {:.1} s: {} ADD completed, {} ADD killed, {} DEL completed, {} DEL killed; {} live",
        setup_and_run.as_secs_f64(),
        t.adds,
        t.adds_killed,
        t.dels,
        t.dels_killed,
        t.live.len()
    );
    assert!(ops >= 200, "too few operations: {ops}");
    assert!(t.adds_killed > 0, "no ADD was killed (seed {seed})");
    assert!(
        t.errors.is_empty(),
        "operations failed:\n{}",
        t.errors.join("\n")
    );
    assert!(
        t.double_grants.is_empty(),
        "addresses handed out twice:\n{}",
        t.double_grants.join("\n")
    );

    let valid: Vec<(&str, &str)> = t
        .live
        .iter()
        .map(|l| (l.id.as_str(), l.ifname.as_str()))
        .collect();
    // What the killed operations left for GC: evidence the kills landed mid-operation.
    let live_keys: BTreeSet<String> = t
        .live
        .iter()
        .map(|l| format!("{}@{}", l.id, l.ifname))
        .collect();
    let live_veths: BTreeSet<String> = t.live.iter().map(|l| result_host_veth(&l.result)).collect();
    let stale_reservations = net
        .reservations()
        .into_iter()
        .filter(|(_, owner)| !live_keys.contains(owner))
        .count();
    let stale_veths = node
        .wf_links()
        .into_iter()
        .filter(|v| !live_veths.contains(v))
        .count();
    println!(
        "before GC: {stale_reservations} reservations and {stale_veths} veths of dead attachments"
    );
    net.gc(Some(&valid)).ok("GC with the live attachments");

    // No address belongs to two live attachments, and the store holds exactly theirs.
    let mut expected: Vec<(IpAddr, String)> = t
        .live
        .iter()
        .flat_map(|l| {
            result_addresses(&l.result)
                .into_iter()
                .map(move |a| (a, format!("{}@{}", l.id, l.ifname)))
        })
        .collect();
    expected.sort();
    let unique: BTreeSet<IpAddr> = expected.iter().map(|(a, _)| *a).collect();
    assert_eq!(
        unique.len(),
        expected.len(),
        "two live attachments share an address"
    );
    assert_eq!(net.reservations(), expected, "store after GC");
    let mut owners: Vec<String> = t
        .live
        .iter()
        .map(|l| format!("{}@{}", l.id, l.ifname))
        .collect();
    owners.sort();
    assert_eq!(net.owner_index(), owners, "owner index after GC");
    assert_eq!(
        net.scratch_files(),
        Vec::<String>::new(),
        "scratch files left"
    );

    // No weft veth but the live ones, on the node and in the pods.
    let mut veths: Vec<String> = t.live.iter().map(|l| result_host_veth(&l.result)).collect();
    veths.sort();
    assert_eq!(node.wf_links(), veths, "host veths after GC");
    let all_pods = pods
        .iter()
        .enumerate()
        .flat_map(|(w, list)| list.iter().enumerate().map(move |(p, pod)| (w, p, pod)));
    for (w, p, pod) in all_pods {
        let mut want: Vec<String> = t
            .live
            .iter()
            .filter(|l| l.worker == w && l.pod == p)
            .map(|l| l.ifname.clone())
            .collect();
        want.push("lo".into());
        want.sort();
        let mut have: Vec<String> = cni_support::links(&pod.ns)
            .into_iter()
            .map(|l| l.name)
            .collect();
        have.sort();
        assert_eq!(have, want, "interfaces in pod {p} of worker {w} after GC");
    }

    // Every live pod is still configured, and CHECK agrees.
    for l in &t.live {
        let pod = &pods[l.worker][l.pod];
        let have = cni_support::addresses(&pod.ns, &l.ifname);
        for addr in result_addresses(&l.result) {
            let prefix = if addr.is_ipv4() { 32 } else { 128 };
            assert!(
                have.contains(&format!("{addr}/{prefix}")),
                "{}@{} lost {addr}: {have:?}",
                l.id,
                l.ifname
            );
        }
        let netns = pod.netns();
        let env = attachment_env("CHECK", &l.id, &l.ifname, &netns);
        node.run(&env, &net.with_prev(&l.result))
            .ok(&format!("CHECK of live {}@{}", l.id, l.ifname));
    }

    // And they all come apart cleanly.
    for l in &t.live {
        let netns = pods[l.worker][l.pod].netns();
        net.del_att(&l.id, &l.ifname, &netns, Some(&l.result))
            .ok("final DEL");
    }
    net.assert_no_state("after DEL of every live attachment");
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
}

/// A runtime whose ADD timed out (the plugin was killed) retries: ADD again, and when that
/// fails, DEL then ADD. Whatever instant the kill hit, the retry must end with one working
/// attachment holding exactly the addresses its result names, and DEL must leave nothing.
#[test]
fn add_retried_after_a_kill_at_any_point() {
    let node = Node::new("rk");
    let net = Net::dual(&node, "weftrk", 51);
    let (mut landed, mut retries_refused) = (0, 0);
    for delay_us in (0..=8000u64).step_by(250) {
        let pod = Pod::new("rk");
        let netns = pod.netns();
        let env = attachment_env("ADD", &pod.id, "eth0", &netns);
        let delay = Some(Duration::from_micros(delay_us));
        let reply = match run(&node, &env, &net.bytes(), delay) {
            Outcome::Completed(reply) => reply,
            Outcome::Killed => {
                landed += 1;
                let retry = net.add(&pod);
                if retry.success() {
                    retry
                } else {
                    retries_refused += 1;
                    net.del(&pod, None).ok("DEL after a refused retry");
                    net.add(&pod)
                }
            }
        };
        let result = reply.ok(&format!("ADD (kill at {delay_us} us)")).json();
        let mut held = net.reserved_by(&pod.id, "eth0");
        held.sort();
        let mut named = result_addresses(&result);
        named.sort();
        assert_eq!(held, named, "kill at {delay_us} us: reservation vs result");
        assert_eq!(
            net.reservations().len(),
            2,
            "kill at {delay_us} us: nothing else reserved"
        );
        assert_eq!(node.wf_links(), vec![result_host_veth(&result)]);
        net.check(&pod, &result)
            .ok(&format!("CHECK after a kill at {delay_us} us"));
        net.del(&pod, Some(&result)).ok("DEL");
        net.assert_no_state(&format!("kill at {delay_us} us, after DEL"));
        assert_eq!(net.scratch_files(), Vec::<String>::new());
    }
    println!(
        "33 kills scheduled, {landed} landed before ADD finished; {retries_refused} of those retries were refused until DEL"
    );
}
