//! Turning the runs into the printed report. Pure functions, so the arithmetic is tested.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::configs::Config;
use super::iperf::IperfSample;
use super::rr::RrSample;
use crate::bench::stats::Summary;

/// Acceptance targets (docs/benchmarks.md says where they come from).
pub const TARGET_SAME_NODE: f64 = 0.95;
pub const TARGET_CROSS_NODE: f64 = 1.0;
pub const TARGET_CROSS_NODE_LATENCY: f64 = 1.05;

/// One configuration's measurements in one repetition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    pub rep: usize,
    pub throughput: IperfSample,
    pub latency: RrSample,
}

/// Everything measured, by configuration, plus the weft counters' growth per configuration.
#[derive(Debug, Clone, Default)]
pub struct Results {
    pub runs: BTreeMap<Config, Vec<Run>>,
    pub counters: BTreeMap<Config, Vec<(&'static str, u64)>>,
}

impl Results {
    pub fn push(&mut self, config: Config, run: Run) {
        self.runs.entry(config).or_default().push(run);
    }

    /// Adds `delta` (counter name, increase) to what `config`'s runs made the programs do.
    pub fn add_counters(&mut self, config: Config, delta: &[(&'static str, u64)]) {
        let total = self.counters.entry(config).or_default();
        for (name, value) in delta {
            match total.iter_mut().find(|(n, _)| n == name) {
                Some((_, v)) => *v += value,
                None => total.push((name, *value)),
            }
        }
    }

    fn runs(&self, config: Config) -> &[Run] {
        self.runs
            .get(&config)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    pub fn summary(&self, config: Config) -> ConfigSummary {
        let runs = self.runs(config);
        let of = |f: fn(&Run) -> f64| Summary::of(&runs.iter().map(f).collect::<Vec<_>>());
        ConfigSummary {
            gbps: of(|r| r.throughput.gbps),
            retransmits: of(|r| r.throughput.retransmits as f64),
            retransmits_total: runs.iter().map(|r| r.throughput.retransmits).sum(),
            p50_us: of(|r| r.latency.p50_us),
            p99_us: of(|r| r.latency.p99_us),
        }
    }

    /// Ratio of the medians of `metric`, numerator over denominator; NaN when either is
    /// missing or the denominator is zero.
    pub fn ratio(&self, num: Config, den: Config, metric: Metric) -> f64 {
        let (a, b) = (self.summary(num), self.summary(den));
        let (a, b) = match metric {
            Metric::Gbps => (a.gbps, b.gbps),
            Metric::P50 => (a.p50_us, b.p50_us),
        };
        if a.n == 0 || b.n == 0 || b.median == 0.0 {
            return f64::NAN;
        }
        a.median / b.median
    }

    /// Per-repetition ratios (same repetition, so the machine's drift cancels), summarised.
    pub fn paired(&self, num: Config, den: Config, metric: Metric) -> Summary {
        let value = |r: &Run| match metric {
            Metric::Gbps => r.throughput.gbps,
            Metric::P50 => r.latency.p50_us,
        };
        let ratios: Vec<f64> = self
            .runs(num)
            .iter()
            .filter_map(|a| {
                let b = self.runs(den).iter().find(|b| b.rep == a.rep)?;
                (value(b) > 0.0).then(|| value(a) / value(b))
            })
            .collect();
        Summary::of(&ratios)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Gbps,
    P50,
}

#[derive(Debug, Clone, Copy)]
pub struct ConfigSummary {
    pub gbps: Summary,
    pub retransmits: Summary,
    pub retransmits_total: u64,
    pub p50_us: Summary,
    pub p99_us: Summary,
}

/// How the run was made, for the header.
#[derive(Debug, Clone)]
pub struct Setup {
    pub reps: usize,
    pub seconds: u32,
    pub affinity: (usize, usize),
    pub warmup: usize,
    pub timed: usize,
    pub client_cpu: usize,
    pub server_cpu: usize,
    pub pod_mtu: u32,
    pub nice: i32,
    pub attach_mode: &'static str,
    pub reference: &'static str,
    pub underlay: &'static str,
}

pub fn render(setup: &Setup, results: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "weft bench datapath: {} interleaved repetitions; iperf3 single TCP stream, {} s, -A {},{}; \
         RR 1-byte TCP_NODELAY busy-poll, {} warm-up + {} timed, client CPU{} server CPU{}; \
         pod MTU {} everywhere; measured processes at nice {}; weft attach mode {}; reference nodes: {}; underlay: {}",
        setup.reps,
        setup.seconds,
        setup.affinity.0,
        setup.affinity.1,
        setup.warmup,
        setup.timed,
        setup.client_cpu,
        setup.server_cpu,
        setup.pod_mtu,
        setup.nice,
        setup.attach_mode,
        setup.reference,
        setup.underlay,
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<22} {:>7} {:>17} {:>13} {:>8} {:>8} {:>15}",
        "configuration", "Gbit/s", "(min-max)", "retr median", "(total)", "RR p50", "RR p99 µs"
    );
    for config in Config::ALL {
        let s = results.summary(config);
        if s.gbps.n == 0 {
            let _ = writeln!(out, "{:<22} (no runs)", config.label());
            continue;
        }
        let _ = writeln!(
            out,
            "{:<22} {:>7.2} {:>17} {:>13} {:>8} {:>8.1} {:>15.1}",
            config.label(),
            s.gbps.median,
            format!("({:.2}-{:.2})", s.gbps.min, s.gbps.max),
            format!("{:.0}", s.retransmits.median),
            format!("({})", s.retransmits_total),
            s.p50_us.median,
            s.p99_us.median,
        );
    }
    let _ = writeln!(
        out,
        "(Gbit/s: median over repetitions of the receiver's rate; RR: median over repetitions \
         of each run's p50 / p99, µs; RR p50 range per run below)"
    );
    for config in Config::ALL {
        let s = results.summary(config).p50_us;
        if s.n > 0 {
            let _ = writeln!(
                out,
                "  {:<22} RR p50 over runs {:.1}-{:.1} µs",
                config.label(),
                s.min,
                s.max
            );
        }
    }

    if !results.counters.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "weft datapath counters (both nodes, growth during each configuration's runs):"
        );
        for (config, counters) in &results.counters {
            let shown: Vec<String> = counters
                .iter()
                .filter(|(_, v)| *v > 0)
                .map(|(n, v)| format!("{n} +{v}"))
                .collect();
            let shown = if shown.is_empty() {
                "nothing".to_string()
            } else {
                shown.join(", ")
            };
            let _ = writeln!(out, "  {:<22} {shown}", config.label());
        }
    }

    let same = results.ratio(Config::WeftSameNode, Config::RawVeth, Metric::Gbps);
    let cross = results.ratio(
        Config::WeftCrossNode,
        Config::ReferenceCrossNode,
        Metric::Gbps,
    );
    let latency = results.ratio(
        Config::WeftCrossNode,
        Config::ReferenceCrossNode,
        Metric::P50,
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "paired per-repetition ratios, median (min-max):");
    for (label, num, den, metric) in [
        (
            "same-node weft/veth",
            Config::WeftSameNode,
            Config::RawVeth,
            Metric::Gbps,
        ),
        (
            "same-node bridge/veth",
            Config::BridgeSameNode,
            Config::RawVeth,
            Metric::Gbps,
        ),
        (
            "cross-node weft/reference",
            Config::WeftCrossNode,
            Config::ReferenceCrossNode,
            Metric::Gbps,
        ),
        (
            "cross-node-latency weft/reference",
            Config::WeftCrossNode,
            Config::ReferenceCrossNode,
            Metric::P50,
        ),
        (
            "ClusterIP/pod-direct (same node)",
            Config::WeftClusterIp,
            Config::WeftSameNode,
            Metric::Gbps,
        ),
        (
            "ClusterIP/pod-direct latency",
            Config::WeftClusterIp,
            Config::WeftSameNode,
            Metric::P50,
        ),
    ] {
        let s = results.paired(num, den, metric);
        if s.n > 0 {
            let _ = writeln!(
                out,
                "  {label:<34} {:.2} ({:.2}-{:.2})",
                s.median, s.min, s.max
            );
        }
    }
    let _ = writeln!(
        out,
        "targets: same-node >= {TARGET_SAME_NODE:.2}x veth: {}; cross-node >= {TARGET_CROSS_NODE:.2}x reference: {}; \
         cross-node latency <= {TARGET_CROSS_NODE_LATENCY:.2}x reference: {}",
        verdict(same >= TARGET_SAME_NODE, same),
        verdict(cross >= TARGET_CROSS_NODE, cross),
        verdict(latency <= TARGET_CROSS_NODE_LATENCY, latency),
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "ratio same-node weft/veth: {same:.2}");
    let _ = writeln!(out, "ratio cross-node weft/reference: {cross:.2}");
    let _ = writeln!(out, "ratio cross-node-latency weft/reference: {latency:.2}");
    let cluster_ip = results.ratio(Config::WeftClusterIp, Config::WeftSameNode, Metric::Gbps);
    if !cluster_ip.is_nan() {
        let _ = writeln!(out, "ratio ClusterIP/pod-direct same-node: {cluster_ip:.2}");
    }
    out
}

fn verdict(met: bool, value: f64) -> &'static str {
    if value.is_nan() {
        "not measured"
    } else if met {
        "met"
    } else {
        "MISSED"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rep: usize, gbps: f64, retransmits: u64, p50_us: f64) -> Run {
        Run {
            rep,
            throughput: IperfSample { gbps, retransmits },
            latency: RrSample {
                round_trips: 5000,
                p50_us,
                p99_us: p50_us * 2.0,
            },
        }
    }

    fn sample_results() -> Results {
        let mut r = Results::default();
        for (rep, (veth, weft)) in [(10.0, 9.8), (12.0, 11.0), (11.0, 11.0)]
            .into_iter()
            .enumerate()
        {
            r.push(Config::RawVeth, run(rep, veth, 0, 10.0));
            r.push(Config::WeftSameNode, run(rep, weft, 1, 11.0));
            r.push(Config::BridgeSameNode, run(rep, 9.0, 2, 13.0));
            r.push(Config::WeftCrossNode, run(rep, 9.0 + rep as f64, 3, 20.0));
            r.push(Config::ReferenceCrossNode, run(rep, 8.0, 4, 25.0));
        }
        r
    }

    #[test]
    fn ratios_are_ratios_of_medians() {
        let r = sample_results();
        // medians: weft same 11.0, veth 11.0; weft cross 10.0, reference 8.0; p50 20 / 25.
        assert_eq!(
            r.ratio(Config::WeftSameNode, Config::RawVeth, Metric::Gbps),
            1.0
        );
        assert_eq!(
            r.ratio(
                Config::WeftCrossNode,
                Config::ReferenceCrossNode,
                Metric::Gbps
            ),
            1.25
        );
        assert_eq!(
            r.ratio(
                Config::WeftCrossNode,
                Config::ReferenceCrossNode,
                Metric::P50
            ),
            0.8
        );
        let paired = r.paired(Config::WeftSameNode, Config::RawVeth, Metric::Gbps);
        assert_eq!(paired.n, 3);
        assert_eq!(paired.max, 1.0);
        assert!((paired.min - 11.0 / 12.0).abs() < 1e-12);
        assert!(Results::default()
            .ratio(Config::WeftSameNode, Config::RawVeth, Metric::Gbps)
            .is_nan());
    }

    #[test]
    fn the_report_ends_with_the_three_ratio_lines() {
        let mut r = sample_results();
        r.add_counters(Config::WeftSameNode, &[("local_delivery", 5), ("encap", 0)]);
        r.add_counters(Config::WeftSameNode, &[("local_delivery", 7)]);
        let setup = Setup {
            reps: 3,
            seconds: 5,
            affinity: (0, 0),
            warmup: 500,
            timed: 5000,
            client_cpu: 0,
            server_cpu: 1,
            pod_mtu: 1450,
            nice: -10,
            attach_mode: "auto",
            reference: "bare",
            underlay: "veth",
        };
        let text = render(&setup, &r);
        let last: Vec<&str> = text.lines().rev().take(3).collect();
        assert_eq!(
            last,
            [
                "ratio cross-node-latency weft/reference: 0.80",
                "ratio cross-node weft/reference: 1.25",
                "ratio same-node weft/veth: 1.00",
            ]
        );
        assert!(text.contains("local_delivery +12"), "{text}");
        assert!(!text.contains("encap +0"), "{text}");
        assert!(text.contains("weft cross-node"), "{text}");
        assert!(
            text.contains("cross-node >= 1.00x reference: met"),
            "{text}"
        );
    }
}
