//! The guard's BPF LSM object: its map layout in C (read from the compiled object's BTF with
//! `bpftool btf dump -j`) equals the Rust mirror, and the loader gets every program as far as
//! the kernel's verdict (the object parses and its CO-RE field accesses resolve against this
//! kernel's BTF). Nothing is attached or pinned.

use std::collections::{BTreeMap, HashMap};
use std::process::Command;

use serde_json::Value;
use weft_guard::lsm::{self, MAP_FENCED, MAP_TYPE_HASH, MAX_FENCED, STRUCTS};

fn btf_types() -> HashMap<u64, Value> {
    weft_testkit::require_tool("bpftool");
    let path = std::env::temp_dir().join(format!(
        "{}-guard_lsm.bpf.o",
        weft_testkit::unique_name("lsm")
    ));
    std::fs::write(&path, weft_datapath::GUARD_LSM).expect("write object");
    let out = Command::new("bpftool")
        .args(["btf", "dump", "file"])
        .arg(&path)
        .arg("-j")
        .output()
        .expect("run bpftool");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).expect("bpftool JSON");
    json["types"]
        .as_array()
        .expect("types")
        .iter()
        .map(|t| (t["id"].as_u64().expect("id"), t.clone()))
        .collect()
}

fn named<'a>(types: &'a HashMap<u64, Value>, kind: &str, name: &str) -> &'a Value {
    types
        .values()
        .find(|t| t["kind"] == kind && t["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the object's BTF"))
}

fn size_of(types: &HashMap<u64, Value>, id: u64) -> u64 {
    let t = &types[&id];
    match t["kind"].as_str().unwrap_or_default() {
        "TYPEDEF" | "CONST" | "VOLATILE" => size_of(types, t["type_id"].as_u64().expect("type")),
        "ARRAY" => {
            t["nr_elems"].as_u64().expect("n") * size_of(types, t["type_id"].as_u64().expect("t"))
        }
        _ => t["size"].as_u64().expect("size"),
    }
}

#[test]
fn the_map_layout_matches_the_c_header() {
    let types = btf_types();
    for (name, size, fields) in STRUCTS {
        let c = named(&types, "STRUCT", name);
        assert_eq!(c["size"].as_u64(), Some(*size as u64), "size of {name}");
        let c_fields: BTreeMap<String, (u64, u64)> = c["members"]
            .as_array()
            .expect("members")
            .iter()
            .map(|m| {
                let id = m["type_id"].as_u64().expect("type");
                (
                    m["name"].as_str().unwrap_or_default().to_string(),
                    (
                        m["bits_offset"].as_u64().expect("offset") / 8,
                        size_of(&types, id),
                    ),
                )
            })
            .collect();
        let rust: BTreeMap<String, (u64, u64)> = fields
            .iter()
            .map(|(f, off, sz)| (f.to_string(), (*off as u64, *sz as u64)))
            .collect();
        assert_eq!(c_fields, rust, "fields (offset, size) of {name}");
    }
    // The map definition: __uint(x, N) is a pointer to an array of N, __type(x, T) to T.
    let var = named(&types, "VAR", MAP_FENCED);
    let def = &types[&var["type_id"].as_u64().expect("def")];
    let member = |name: &str| -> &Value {
        let m = def["members"]
            .as_array()
            .expect("members")
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("map member {name}"));
        &types[&types[&m["type_id"].as_u64().expect("ptr")]["type_id"]
            .as_u64()
            .expect("pointee")]
    };
    assert_eq!(
        member("type")["nr_elems"].as_u64(),
        Some(u64::from(MAP_TYPE_HASH))
    );
    assert_eq!(
        member("max_entries")["nr_elems"].as_u64(),
        Some(u64::from(MAX_FENCED))
    );
    assert_eq!(member("key")["name"], "weft_guard_netns");
    assert_eq!(member("value")["name"], "weft_guard_fence");
}

#[test]
fn every_program_reaches_the_kernel() {
    weft_testkit::require_root();
    let outcome = lsm::probe_load();
    eprintln!("BPF LSM probe: {outcome:?}");
    match outcome {
        Ok(()) => {}
        Err(why) => assert!(
            why.starts_with("loading wg_sock_create (lsm/socket_create)"),
            "the loader failed before the kernel judged the first program: {why}"
        ),
    }
}
