//! What ADD recorded about each fenced attachment: `<stateDir>/<network>/<containerID>:<ifname>.json`.
//!
//! DEL and GC need it: GC gets no namespace paths at all, and both must only ever remove a
//! fence from the namespace ADD installed it in (a `/proc/<pid>/ns/net` path can be reused
//! by another pod). The file is written before the fence is installed, so a process killed
//! between the two still leaves a record DEL and GC act on.
//!
//! `:` separates container ID and interface because neither may contain one. Files are
//! written under a scratch name and renamed into place, so readers never see half a file.
//! There is no fsync: after a crash every pod namespace is gone too, and GC removes the
//! records it finds (unreadable ones included) once their attachments are not valid.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::GuardError;
use crate::netns::NetnsId;

const SUFFIX: &str = ".json";
const SCRATCH_PREFIX: &str = ".tmp-";
/// State files are small; anything larger is not ours.
const MAX_RECORD: u64 = 64 * 1024;

/// One fenced attachment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub container_id: String,
    pub ifname: String,
    /// The `CNI_NETNS` path given at ADD.
    pub netns: String,
    /// Which namespace that path referred to at ADD.
    pub netns_id: NetnsId,
    pub proxy_uid: u32,
    pub allow_cidrs: Vec<String>,
    pub contract_version: u32,
}

/// The state directory of one network.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// A record found by [`Store::list`], or the file that could not be read as one.
#[derive(Debug)]
pub struct Listed {
    pub container_id: String,
    pub ifname: String,
    pub path: PathBuf,
    pub record: Result<Record, String>,
}

impl Store {
    pub fn new(dir: PathBuf) -> Store {
        Store { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path_of(&self, container_id: &str, ifname: &str) -> PathBuf {
        self.dir.join(format!("{container_id}:{ifname}{SUFFIX}"))
    }

    /// Writes (or replaces) the record, atomically.
    pub fn write(&self, record: &Record) -> Result<(), GuardError> {
        let path = self.path_of(&record.container_id, &record.ifname);
        let fail = |e: &dyn std::fmt::Display| GuardError::state(&path, e);
        fs::create_dir_all(&self.dir).map_err(|e| fail(&e))?;
        let scratch = self.dir.join(format!(
            "{SCRATCH_PREFIX}{}:{}.{}",
            record.container_id,
            record.ifname,
            std::process::id()
        ));
        let bytes = serde_json::to_vec_pretty(record).map_err(|e| fail(&e))?;
        let written = fs::File::create(&scratch)
            .and_then(|mut file| file.write_all(&bytes))
            .and_then(|()| fs::rename(&scratch, &path));
        if let Err(e) = written {
            let _ = fs::remove_file(&scratch);
            return Err(fail(&e));
        }
        Ok(())
    }

    /// The record of an attachment: `Ok(None)` when there is none, `Err` with the reason
    /// when a file exists but is not a readable record.
    pub fn read(&self, container_id: &str, ifname: &str) -> Result<Option<Record>, String> {
        let path = self.path_of(container_id, ifname);
        match read_record(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| format!("{}: not a guard state record: {e}", path.display())),
        }
    }

    /// Removes an attachment's record; a missing one is fine.
    pub fn remove(&self, container_id: &str, ifname: &str) -> Result<(), GuardError> {
        remove_if_present(&self.path_of(container_id, ifname))
    }

    /// Every record (and scratch file) in the directory; an absent directory has none.
    pub fn list(&self) -> Result<Vec<Listed>, GuardError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(GuardError::state(&self.dir, e)),
        };
        let mut listed = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| GuardError::state(&self.dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let path = entry.path();
            if let Some(rest) = name.strip_prefix(SCRATCH_PREFIX) {
                // `<cid>:<ifname>.<pid>`: a leftover of a killed ADD.
                if let Some((container_id, ifname)) =
                    rest.rsplit_once('.').and_then(|(a, _)| a.split_once(':'))
                {
                    listed.push(Listed {
                        container_id: container_id.into(),
                        ifname: ifname.into(),
                        path,
                        record: Err("scratch file of an interrupted ADD".into()),
                    });
                }
                continue;
            }
            let Some((container_id, ifname)) =
                name.strip_suffix(SUFFIX).and_then(|s| s.split_once(':'))
            else {
                continue;
            };
            let record = read_record(&path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    serde_json::from_slice::<Record>(&bytes)
                        .map_err(|e| format!("not a guard state record: {e}"))
                })
                .and_then(|record| {
                    if record.container_id == container_id && record.ifname == ifname {
                        Ok(record)
                    } else {
                        Err("its contents name another attachment".into())
                    }
                });
            listed.push(Listed {
                container_id: container_id.into(),
                ifname: ifname.into(),
                path,
                record,
            });
        }
        listed.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(listed)
    }

    /// Whether the directory can be created and written (STATUS).
    pub fn check_writable(&self) -> Result<(), GuardError> {
        fs::create_dir_all(&self.dir).map_err(|e| GuardError::state(&self.dir, e))?;
        let probe = self
            .dir
            .join(format!("{SCRATCH_PREFIX}status.{}", std::process::id()));
        let result = fs::File::create(&probe).map(|_| ());
        let _ = fs::remove_file(&probe);
        result.map_err(|e| GuardError::state(&self.dir, format!("not writable: {e}")))
    }
}

/// Removes a file; a missing one is fine.
pub fn remove_if_present(path: &Path) -> Result<(), GuardError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(GuardError::state(path, e)),
    }
}

fn read_record(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    fs::File::open(path)?
        .take(MAX_RECORD + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_RECORD {
        return Err(io::Error::other(format!("larger than {MAX_RECORD} bytes")));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(cid: &str, ifname: &str) -> Record {
        Record {
            container_id: cid.into(),
            ifname: ifname.into(),
            netns: "/var/run/netns/x".into(),
            netns_id: NetnsId {
                dev: 4,
                ino: 4026532000,
                cookie: 77,
            },
            proxy_uid: 1337,
            allow_cidrs: vec!["10.96.0.10/32".into()],
            contract_version: 1,
        }
    }

    fn scratch_dir(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("weft-guard-state-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn write_read_list_remove() {
        let dir = scratch_dir("rw");
        let store = Store::new(dir.clone());
        assert_eq!(
            store.list().unwrap().len(),
            0,
            "absent directory lists nothing"
        );
        store.write(&record("a-b", "eth0")).unwrap();
        store.write(&record("a", "b-eth0")).unwrap();
        assert_eq!(
            store.read("a-b", "eth0").unwrap(),
            Some(record("a-b", "eth0"))
        );
        assert_eq!(store.read("zz", "eth0").unwrap(), None);
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed.iter().all(|l| l.record.is_ok()));
        fs::write(dir.join("junk:eth0.json"), b"{").unwrap();
        fs::write(dir.join(".tmp-c1:eth0.123"), b"").unwrap();
        fs::write(dir.join("unrelated.txt"), b"").unwrap();
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 4);
        assert!(store.read("junk", "eth0").is_err());
        store.remove("a-b", "eth0").unwrap();
        store.remove("a-b", "eth0").unwrap();
        assert_eq!(store.read("a-b", "eth0").unwrap(), None);
        store.check_writable().unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }
}
