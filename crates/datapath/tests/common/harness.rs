//! The test-only programs of `bpf/tests/harness.c`, loaded unpinned (their maps are
//! private to the test), and run with BPF_PROG_TEST_RUN.

use aya::maps::{Array, MapData};
use aya::programs::{SchedClassifier, TestRun, TestRunOptions};
use aya::{Ebpf, EbpfLoader};

#[repr(C, align(8))]
struct Aligned<B: ?Sized> {
    bytes: B,
}

static HARNESS: &Aligned<[u8]> = &Aligned {
    bytes: *include_bytes!(concat!(env!("OUT_DIR"), "/tests/harness.bpf.o")),
};

pub struct Harness {
    ebpf: Ebpf,
}

impl Harness {
    pub fn load() -> Harness {
        weft_testkit::require_root();
        let mut ebpf = EbpfLoader::new()
            .load(&HARNESS.bytes)
            .expect("load harness");
        let names: Vec<String> = ebpf.programs().map(|(n, _)| n.to_string()).collect();
        for name in names {
            let prog: &mut SchedClassifier = ebpf
                .program_mut(&name)
                .expect("program")
                .try_into()
                .expect("classifier");
            prog.load()
                .unwrap_or_else(|e| panic!("{name} rejected by the verifier: {e}"));
        }
        Harness { ebpf }
    }

    /// Runs `program` on `frame`; returns its verdict.
    pub fn run(&mut self, program: &str, frame: &[u8]) -> u32 {
        let prog: &mut SchedClassifier = self
            .ebpf
            .program_mut(program)
            .expect("program")
            .try_into()
            .expect("classifier");
        let mut out = vec![0u8; frame.len() + 256];
        let mut opts = TestRunOptions::new();
        opts.data_in = Some(frame);
        opts.data_out = Some(&mut out);
        prog.test_run(opts).expect("BPF_PROG_TEST_RUN").return_value
    }

    /// One of the harness's maps.
    pub fn map(&mut self, name: &str) -> &aya::maps::Map {
        self.ebpf.map(name).expect("harness map")
    }

    /// Entry 0 of the array map `name`, as raw bytes.
    pub fn output<const N: usize>(&mut self, name: &str) -> [u8; N] {
        let map: Array<&MapData, [u8; N]> =
            Array::try_from(self.ebpf.map(name).expect("output map")).expect("array");
        map.get(&0, 0).expect("entry 0")
    }
}
