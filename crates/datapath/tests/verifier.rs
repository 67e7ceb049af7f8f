//! Every program of the embedded objects passes the kernel verifier.

mod common;

use aya::programs::SchedClassifier;
use aya::EbpfLoader;
use common::PinRoot;
use weft_datapath::Program;

#[test]
fn every_embedded_program_passes_the_verifier() {
    let root = PinRoot::new("vf");
    let maps = root.path().join("maps");
    std::fs::create_dir_all(&maps).expect("create pin dir");
    for program in Program::ALL {
        // A pin directory is always given: without one, aya pins the maps straight
        // into /sys/fs/bpf.
        let mut ebpf = EbpfLoader::new()
            .default_map_pin_directory(&maps)
            .load(program.object())
            .unwrap_or_else(|e| panic!("{program}: object rejected: {e}"));
        let names: Vec<String> = ebpf.programs().map(|(name, _)| name.to_string()).collect();
        assert_eq!(names, [program.name()], "one program per object");
        for (name, prog) in ebpf.programs_mut() {
            let classifier: &mut SchedClassifier = prog
                .try_into()
                .unwrap_or_else(|e| panic!("{name} is not a tc classifier: {e}"));
            if let Err(e) = classifier.load() {
                panic!("{name} rejected by the verifier:\n{e}");
            }
        }
    }
}
