//! Times the policy compiler (the hook `weft bench policy` will call):
//! `cargo run --release -p weft-policy --example compile_bench -- [policies] [pods] [nodes] [runs]`
//! (defaults 1000 1000 1 5). Prints medians beside the selector-matching baseline; asserts
//! nothing.

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap_or_else(|_| panic!("{a:?} is not a count")))
        .collect();
    let arg = |i: usize, default: usize| args.get(i).copied().unwrap_or(default);
    let report = weft_policy::bench::measure(arg(0, 1000), arg(1, 1000), arg(2, 1), arg(3, 5));
    print!("{report}");
}
