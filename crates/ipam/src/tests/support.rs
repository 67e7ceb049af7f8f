//! Shared test helpers: scratch directories, range builders, and an on-disk invariant
//! checker that reads the store files directly rather than through the code under test.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Owner, Range, RangeSet};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A uniquely named directory under the system temp dir, removed on drop.
pub struct TestDir(PathBuf);

impl TestDir {
    pub fn new(tag: &str) -> TestDir {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("weft-ipam-{tag}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("create test dir");
        TestDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

pub fn ip(s: &str) -> IpAddr {
    s.parse().expect("test address")
}

pub fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| ip(s)).collect()
}

/// A one-range set over `subnet` with optional bounds and gateway.
pub fn set(
    subnet: &str,
    start: Option<&str>,
    end: Option<&str>,
    gateway: Option<&str>,
) -> RangeSet {
    RangeSet::new(vec![range(subnet, start, end, gateway)])
}

pub fn range(subnet: &str, start: Option<&str>, end: Option<&str>, gateway: Option<&str>) -> Range {
    Range::new(
        subnet.parse().expect("test subnet"),
        start.map(ip),
        end.map(ip),
        gateway.map(ip),
    )
    .expect("valid test range")
}

pub fn owner(id: &str) -> Owner {
    Owner::new(id, "eth0")
}

/// Files currently in the store's scratch directory.
pub fn scratch_files(store_dir: &Path) -> Vec<PathBuf> {
    list(&store_dir.join("tmp"))
}

fn list(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// The target text of a record (a symbolic link), panicking on anything else.
fn record_text(path: &Path) -> String {
    let target = fs::read_link(path).unwrap_or_else(|e| panic!("{path:?} is not a record: {e}"));
    target.into_os_string().into_string().expect("UTF-8 record")
}

fn owner_from_key(key: &str, path: &Path) -> Owner {
    let (id, ifname) = key
        .split_once('@')
        .unwrap_or_else(|| panic!("{path:?}: {key:?} is not <containerId>@<ifname>"));
    assert!(
        !id.is_empty() && !ifname.is_empty(),
        "{path:?}: incomplete owner {key:?}"
    );
    Owner::new(id, ifname)
}

/// The on-disk truth, read without the crate's code: address -> owner.
pub fn disk_reservations(store_dir: &Path) -> BTreeMap<IpAddr, Owner> {
    let mut out = BTreeMap::new();
    for path in list(&store_dir.join("addresses")) {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("utf-8 name");
        let address: IpAddr = name.parse().expect("address record named by an address");
        assert_eq!(address.to_string(), name, "canonical address name");
        out.insert(address, owner_from_key(&record_text(&path), &path));
    }
    out
}

/// Owner index records: key -> (owner, listed addresses).
pub fn disk_indexes(store_dir: &Path) -> BTreeMap<String, (Owner, BTreeSet<IpAddr>)> {
    let mut out = BTreeMap::new();
    for path in list(&store_dir.join("owners")) {
        let key = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("utf-8 name")
            .to_string();
        let owner = owner_from_key(&key, &path);
        let listed = record_text(&path)
            .split(',')
            .map(|a| {
                a.parse()
                    .unwrap_or_else(|e| panic!("{path:?}: bad address {a:?}: {e}"))
            })
            .collect();
        out.insert(key, (owner, listed));
    }
    out
}

/// Invariants that must hold after a kill at any point: every record under a final name
/// is complete, and every address record is listed in its owner's index.
pub fn assert_consistent(store_dir: &Path) {
    let reservations = disk_reservations(store_dir);
    let indexes = disk_indexes(store_dir);
    for (address, owner) in &reservations {
        let key = format!("{}@{}", owner.container_id, owner.ifname);
        let listed = indexes
            .get(&key)
            .unwrap_or_else(|| panic!("{address} is held by {owner} but {owner} has no index"));
        assert!(
            listed.1.contains(address),
            "{address} held by {owner} is missing from its index {:?}",
            listed.1
        );
    }
}

/// Recursively copies a store directory (directories, files and records).
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create copy dir");
    for entry in fs::read_dir(from).expect("list for copy") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            copy_dir(&entry.path(), &target);
        } else if kind.is_symlink() {
            let text = fs::read_link(entry.path()).expect("read record");
            std::os::unix::fs::symlink(text, &target).expect("copy record");
        } else {
            fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}
