//! The Rust mirrors in `weft_datapath::layout` agree with the C header, as compiled:
//! every struct size and field offset, every enum value and every map definition is
//! read from the BTF of each embedded object (via `bpftool btf dump -j`).

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;
use weft_datapath::layout::{MapSpec, ENUMS, MAPS, STRUCTS};
use weft_datapath::Program;

/// The BTF of one object: types by id, and ids by (kind, name).
struct Btf {
    program: Program,
    types: HashMap<u64, Value>,
    named: HashMap<(String, String), u64>,
}

/// A temporary copy of an embedded object, for bpftool to read.
struct TempObject(PathBuf);

impl Drop for TempObject {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Btf {
    fn of(program: Program) -> Btf {
        weft_testkit::require_tool("bpftool");
        let file = TempObject(std::env::temp_dir().join(format!(
            "{}-{}.bpf.o",
            weft_testkit::unique_name("ly"),
            program.name()
        )));
        std::fs::write(&file.0, program.object()).expect("write object");
        let out = Command::new("bpftool")
            .args(["btf", "dump", "file"])
            .arg(&file.0)
            .arg("-j")
            .output()
            .expect("run bpftool");
        assert!(
            out.status.success(),
            "bpftool btf dump failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: Value = serde_json::from_slice(&out.stdout).expect("bpftool JSON");
        let mut types = HashMap::new();
        let mut named = HashMap::new();
        for t in json["types"].as_array().expect("types array") {
            let id = t["id"].as_u64().expect("type id");
            let kind = t["kind"].as_str().unwrap_or_default().to_string();
            let name = t["name"].as_str().unwrap_or_default().to_string();
            named.insert((kind, name), id);
            types.insert(id, t.clone());
        }
        Btf {
            program,
            types,
            named,
        }
    }

    fn ty(&self, id: u64) -> &Value {
        self.types
            .get(&id)
            .unwrap_or_else(|| panic!("{}: no BTF type {id}", self.program))
    }

    fn find(&self, kind: &str, name: &str) -> &Value {
        let id = self
            .named
            .get(&(kind.to_string(), name.to_string()))
            .unwrap_or_else(|| panic!("{}: no {kind} {name} in BTF", self.program));
        self.ty(*id)
    }

    /// Byte size of a type, through typedefs, qualifiers and arrays.
    fn size_of(&self, id: u64) -> u64 {
        let t = self.ty(id);
        match t["kind"].as_str().unwrap_or_default() {
            "TYPEDEF" | "CONST" | "VOLATILE" | "RESTRICT" => {
                self.size_of(t["type_id"].as_u64().expect("type_id"))
            }
            "ARRAY" => {
                t["nr_elems"].as_u64().expect("nr_elems")
                    * self.size_of(t["type_id"].as_u64().expect("elem"))
            }
            _ => t["size"]
                .as_u64()
                .unwrap_or_else(|| panic!("{}: type {id} has no size: {t}", self.program)),
        }
    }

    /// Members of a struct: name -> (byte offset, byte size).
    fn members(&self, s: &Value) -> BTreeMap<String, (u64, u64)> {
        s["members"]
            .as_array()
            .expect("members")
            .iter()
            .map(|m| {
                let bits = m["bits_offset"].as_u64().expect("bits_offset");
                assert_eq!(bits % 8, 0, "bitfield member {m}");
                (
                    m["name"].as_str().unwrap_or_default().to_string(),
                    (
                        bits / 8,
                        self.size_of(m["type_id"].as_u64().expect("type_id")),
                    ),
                )
            })
            .collect()
    }

    /// `__uint(x, N)` in a BTF map definition is a pointer to an array of N elements.
    fn map_def_uint(&self, members: &[Value], name: &str) -> Option<u64> {
        let m = members.iter().find(|m| m["name"] == name)?;
        let ptr = self.ty(m["type_id"].as_u64()?);
        self.ty(ptr["type_id"].as_u64()?)["nr_elems"].as_u64()
    }

    /// `__type(x, T)` is a pointer to T.
    fn map_def_type_size(&self, members: &[Value], name: &str) -> Option<u64> {
        let m = members.iter().find(|m| m["name"] == name)?;
        let ptr = self.ty(m["type_id"].as_u64()?);
        Some(self.size_of(ptr["type_id"].as_u64()?))
    }

    fn check_map(&self, spec: &MapSpec) {
        let var = self.find("VAR", spec.name);
        let def = self.ty(var["type_id"].as_u64().expect("var type"));
        let members = def["members"].as_array().expect("map def members");
        let got = (
            self.map_def_uint(members, "type"),
            self.map_def_type_size(members, "key"),
            self.map_def_type_size(members, "value"),
            self.map_def_uint(members, "max_entries"),
            self.map_def_uint(members, "map_flags").unwrap_or(0),
        );
        let s = spec.shape;
        let want = (
            Some(u64::from(s.map_type)),
            Some(u64::from(s.key_size)),
            Some(u64::from(s.value_size)),
            Some(u64::from(s.max_entries)),
            u64::from(s.flags),
        );
        assert_eq!(
            got, want,
            "{}: map {} (type, key, value, max_entries, flags) in C vs Rust",
            self.program, spec.name
        );
    }
}

#[test]
fn structs_match_the_c_header() {
    for program in Program::ALL {
        let btf = Btf::of(program);
        for s in STRUCTS {
            let c = btf.find("STRUCT", s.c_name);
            assert_eq!(
                c["size"].as_u64(),
                Some(s.size as u64),
                "{program}: size of struct {}",
                s.c_name
            );
            let c_fields = btf.members(c);
            let rust_fields: BTreeMap<String, (u64, u64)> = s
                .fields
                .iter()
                .map(|f| (f.name.to_string(), (f.offset as u64, f.size as u64)))
                .collect();
            assert_eq!(
                c_fields, rust_fields,
                "{program}: fields (offset, size) of struct {}",
                s.c_name
            );
        }
    }
}

#[test]
fn enums_match_the_c_header() {
    for program in Program::ALL {
        let btf = Btf::of(program);
        for (name, values) in ENUMS {
            let c = btf.find("ENUM", name);
            let c_values: BTreeMap<String, u64> = c["values"]
                .as_array()
                .expect("values")
                .iter()
                .map(|v| {
                    (
                        v["name"].as_str().unwrap_or_default().to_string(),
                        v["val"].as_u64().expect("enum value"),
                    )
                })
                .collect();
            let rust_values: BTreeMap<String, u64> =
                values.iter().map(|(n, v)| (n.to_string(), *v)).collect();
            assert_eq!(c_values, rust_values, "{program}: enum {name}");
        }
        // Every weft enum in the header is mirrored (a new one must be added to ENUMS).
        for (kind, name) in btf.named.keys() {
            if kind == "ENUM" && name.starts_with("weft_") {
                assert!(
                    ENUMS.iter().any(|(n, _)| n == name),
                    "{program}: enum {name} has no Rust mirror"
                );
            }
        }
    }
}

#[test]
fn map_definitions_match_the_expected_shapes() {
    for program in Program::ALL {
        let btf = Btf::of(program);
        for spec in &MAPS {
            btf.check_map(spec);
        }
    }
}
