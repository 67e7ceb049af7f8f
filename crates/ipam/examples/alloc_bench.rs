//! Cost of allocate and release on a /24 that already holds 100 reservations, beside a
//! baseline measured in the same run: publishing one file the way a reservation is
//! published (write a scratch file, hard-link it, unlink the scratch), with no lock,
//! index, cursor or search. Not a test: it prints figures and asserts nothing.
//!
//! `cargo run --release -p weft-ipam --example alloc_bench [dir]`

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use weft_ipam::{Owner, Range, RangeSet, Store};

const ROUNDS: usize = 2000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base: PathBuf = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("weft-ipam-bench-{}", std::process::id()));
    fs::create_dir_all(&base)?;
    let result = run(&base);
    let _ = fs::remove_dir_all(&base);
    result
}

fn run(base: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let store = Store::open(base, "bench")?;
    let sets = vec![RangeSet::new(vec![Range::new(
        "10.244.1.0/24".parse()?,
        None,
        None,
        Some("10.244.1.1".parse()?),
    )?])];
    for i in 0..100 {
        store.allocate(&Owner::new(format!("resident{i}"), "eth0"), &sets)?;
    }

    let mut allocate = Vec::with_capacity(ROUNDS);
    let mut release = Vec::with_capacity(ROUNDS);
    let mut baseline = Vec::with_capacity(ROUNDS);
    let scratch = base.join("baseline");
    fs::create_dir_all(&scratch)?;
    for i in 0..ROUNDS {
        let owner = Owner::new(format!("pod{i}"), "eth0");
        let t = Instant::now();
        store.allocate(&owner, &sets)?;
        allocate.push(t.elapsed());
        let t = Instant::now();
        store.release(&owner)?;
        release.push(t.elapsed());

        let t = Instant::now();
        let tmp = scratch.join("tmp");
        let target = scratch.join(format!("10.244.1.{}", i % 250));
        let mut f = fs::File::create_new(&tmp)?;
        f.write_all(b"{\"containerId\":\"pod\",\"ifname\":\"eth0\"}\n")?;
        drop(f);
        fs::hard_link(&tmp, &target)?;
        fs::remove_file(&tmp)?;
        baseline.push(t.elapsed());
        fs::remove_file(&target)?;
    }

    let base_median = median(&mut baseline);
    println!("{ROUNDS} rounds on a /24 with 100 other reservations (microseconds)");
    println!(
        "{:<36} {:>8} {:>8} {:>8} {:>7}",
        "", "p10", "median", "p90", "ratio"
    );
    report("baseline: publish one file", &mut baseline, base_median);
    report("allocate (new owner)", &mut allocate, base_median);
    report("release", &mut release, base_median);
    Ok(())
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn report(name: &str, samples: &mut [Duration], baseline: Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    let ratio = samples[samples.len() / 2].as_secs_f64() / baseline.as_secs_f64();
    println!(
        "{name:<36} {:>8.1} {:>8.1} {:>8.1} {:>6.1}x",
        at(0.1),
        at(0.5),
        at(0.9),
        ratio
    );
}
