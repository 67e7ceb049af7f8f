//! The Rust mirrors in `weft_datapath::layout` agree with the C headers, as compiled: the
//! BTF of each embedded object (via `bpftool btf dump -j`) is compared with them, both
//! ways. Every struct size and field offset and size, every enum value and every map
//! definition must match, and every `weft_` struct, enum and map the BTF holds must be
//! mirrored (or, for structs, listed as internal with a reason), so nothing can be added
//! to a header without its Rust side. The description of earlier layouts the migration
//! relies on is checked against that release's objects too.

mod common;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::Command;
use weft_datapath::layout::{MapShape, ENUMS, INTERNAL_STRUCTS, MAPS, STRUCTS};
use weft_datapath::migrate::PREDECESSORS;
use weft_datapath::Program;

/// The BTF of one object: types by id, and ids by (kind, name).
struct Btf {
    label: String,
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
    fn of(label: &str, object: &[u8]) -> Btf {
        weft_testkit::require_tool("bpftool");
        let file = TempObject(std::env::temp_dir().join(format!(
            "{}-{}.bpf.o",
            weft_testkit::unique_name("ly"),
            label.replace('/', "-")
        )));
        std::fs::write(&file.0, object).expect("write object");
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
            label: label.to_string(),
            types,
            named,
        }
    }

    fn current() -> Vec<Btf> {
        Program::ALL
            .iter()
            .map(|p| Btf::of(p.name(), p.object()))
            .collect()
    }

    fn ty(&self, id: u64) -> &Value {
        self.types
            .get(&id)
            .unwrap_or_else(|| panic!("{}: no BTF type {id}", self.label))
    }

    fn get(&self, kind: &str, name: &str) -> Option<&Value> {
        self.named
            .get(&(kind.to_string(), name.to_string()))
            .map(|id| self.ty(*id))
    }

    fn names(&self, kind: &str) -> BTreeSet<String> {
        self.named
            .keys()
            .filter(|(k, n)| k == kind && n.starts_with("weft_"))
            .map(|(_, n)| n.clone())
            .collect()
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
                .unwrap_or_else(|| panic!("{}: type {id} has no size: {t}", self.label)),
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

    /// The map variables of the `.maps` section, by name.
    fn maps(&self) -> BTreeSet<String> {
        let Some(sec) = self.get("DATASEC", ".maps") else {
            return BTreeSet::new();
        };
        sec["vars"]
            .as_array()
            .expect("vars")
            .iter()
            .map(|v| {
                let var = self.ty(v["type_id"].as_u64().expect("var id"));
                var["name"].as_str().expect("var name").to_string()
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

    /// (type, key size, value size, max_entries, flags) of the map variable `name`.
    fn map_shape(&self, name: &str) -> MapShape {
        let var = self
            .get("VAR", name)
            .unwrap_or_else(|| panic!("{}: no map {name}", self.label));
        let def = self.ty(var["type_id"].as_u64().expect("var type"));
        let members = def["members"].as_array().expect("map def members");
        let want = |v: Option<u64>, what: &str| {
            u32::try_from(v.unwrap_or_else(|| panic!("{}: map {name} has no {what}", self.label)))
                .expect("fits u32")
        };
        MapShape {
            map_type: want(self.map_def_uint(members, "type"), "type"),
            key_size: want(self.map_def_type_size(members, "key"), "key"),
            value_size: want(self.map_def_type_size(members, "value"), "value"),
            max_entries: want(self.map_def_uint(members, "max_entries"), "max_entries"),
            flags: want(
                Some(self.map_def_uint(members, "map_flags").unwrap_or(0)),
                "flags",
            ),
        }
    }
}

#[test]
fn every_struct_matches_its_mirror_and_every_struct_is_mirrored() {
    let objects = Btf::current();
    for s in STRUCTS {
        let mut seen = false;
        for btf in &objects {
            let Some(c) = btf.get("STRUCT", s.c_name) else {
                continue;
            };
            seen = true;
            assert_eq!(
                c["size"].as_u64(),
                Some(s.size as u64),
                "{}: size of struct {}",
                btf.label,
                s.c_name
            );
            let rust_fields: BTreeMap<String, (u64, u64)> = s
                .fields
                .iter()
                .map(|f| (f.name.to_string(), (f.offset as u64, f.size as u64)))
                .collect();
            assert_eq!(
                btf.members(c),
                rust_fields,
                "{}: fields (offset, size) of struct {}",
                btf.label,
                s.c_name
            );
        }
        assert!(seen, "struct {} is in no object (stale mirror?)", s.c_name);
    }
    for btf in &objects {
        for name in btf.names("STRUCT") {
            let known = name.starts_with("weft_btf_")
                || STRUCTS.iter().any(|s| s.c_name == name)
                || INTERNAL_STRUCTS.iter().any(|(n, _)| *n == name);
            assert!(
                known,
                "{}: struct {name} has no Rust mirror (layout::STRUCTS) and is not listed \
                 in layout::INTERNAL_STRUCTS",
                btf.label
            );
        }
    }
}

#[test]
fn every_enum_matches_its_mirror_and_every_enum_is_mirrored() {
    let objects = Btf::current();
    for (name, values) in ENUMS {
        let rust_values: BTreeMap<String, u64> =
            values.iter().map(|(n, v)| (n.to_string(), *v)).collect();
        let mut seen = false;
        for btf in &objects {
            let Some(c) = btf.get("ENUM", name) else {
                continue;
            };
            seen = true;
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
            assert_eq!(c_values, rust_values, "{}: enum {name}", btf.label);
        }
        assert!(seen, "enum {name} is in no object (stale mirror?)");
    }
    for btf in &objects {
        for name in btf.names("ENUM") {
            assert!(
                ENUMS.iter().any(|(n, _)| *n == name),
                "{}: enum {name} has no Rust mirror (layout::ENUMS)",
                btf.label
            );
        }
    }
}

#[test]
fn every_map_matches_its_spec_and_every_map_is_known() {
    let objects = Btf::current();
    for spec in &MAPS {
        let holders: Vec<&Btf> = objects
            .iter()
            .filter(|b| b.maps().contains(spec.name))
            .collect();
        assert!(!holders.is_empty(), "map {} is in no object", spec.name);
        for btf in holders {
            assert_eq!(
                btf.map_shape(spec.name),
                spec.shape,
                "{}: map {} (type, key, value, max_entries, flags) in C vs Rust",
                btf.label,
                spec.name
            );
        }
    }
    for btf in &objects {
        for name in btf.maps() {
            assert!(
                MAPS.iter().any(|m| m.name == name),
                "{}: map {name} is not in layout::MAPS",
                btf.label
            );
            assert!(
                name.len() <= 15,
                "{}: map name {name} exceeds the kernel's 15 bytes",
                btf.label
            );
        }
    }
}

#[test]
fn earlier_layouts_are_described_as_their_release_built_them() {
    let legacy: Vec<Btf> = common::legacy::OBJECTS
        .iter()
        .map(|(name, _)| Btf::of(&format!("legacy_v0/{name}"), common::legacy::object(name)))
        .collect();
    for pred in PREDECESSORS.iter().filter(|p| p.version == 0) {
        // Layout v0 pinned each map by its own name.
        for btf in &legacy {
            assert_eq!(
                btf.map_shape(pred.pin_name),
                pred.shape,
                "{}: map {} of layout v0",
                btf.label,
                pred.pin_name
            );
        }
    }
    let v0_maps: BTreeSet<String> = legacy.iter().flat_map(|b| b.maps()).collect();
    let described: BTreeSet<String> = PREDECESSORS
        .iter()
        .filter(|p| p.version == 0)
        .map(|p| p.pin_name.to_string())
        .collect();
    assert_eq!(v0_maps, described, "every map of layout v0 is migrated");
}
