//! The content of the store's records, and reading it back tolerantly: a record that does
//! not parse is reported as unreadable rather than as an error, because only a power loss
//! (see the crate docs) or someone else's hand can produce one, and it must still count
//! as "taken".
//!
//! - address record `addresses/<address>`: a symbolic link to `<containerId>@<ifname>`;
//! - owner index `owners/<containerId>@<ifname>`: a symbolic link to the comma-separated
//!   addresses the owner may hold;
//! - cursor `cursors/ipv4|ipv6`: a regular file starting with an address, padded.

use std::io;
use std::net::IpAddr;
use std::path::Path;

use super::fsio::{self, RecordText};
use super::layout::Layout;
use crate::addr::Family;
use crate::owner::Owner;

pub(crate) enum AddressState {
    Free,
    Held(Owner),
    Unreadable,
}

pub(crate) enum IndexState {
    Absent,
    Listed(Vec<IpAddr>),
    Unreadable,
}

pub(crate) fn address_record(owner: &Owner) -> String {
    owner.file_key()
}

pub(crate) fn index_record(addresses: &[IpAddr]) -> String {
    let texts: Vec<String> = addresses.iter().map(IpAddr::to_string).collect();
    texts.join(",")
}

pub(crate) fn read_address(layout: &Layout, a: IpAddr) -> io::Result<AddressState> {
    read_address_file(&layout.address(a))
}

pub(crate) fn read_address_file(path: &Path) -> io::Result<AddressState> {
    Ok(match fsio::read_record(path)? {
        RecordText::Absent => AddressState::Free,
        RecordText::Text(text) => match Owner::from_file_key(&text) {
            Some(owner) => AddressState::Held(owner),
            None => AddressState::Unreadable,
        },
        RecordText::Foreign => AddressState::Unreadable,
    })
}

pub(crate) fn read_index_file(path: &Path) -> io::Result<IndexState> {
    Ok(match fsio::read_record(path)? {
        RecordText::Absent => IndexState::Absent,
        RecordText::Text(text) => text
            .split(',')
            .map(|a| a.parse::<IpAddr>().ok())
            .collect::<Option<Vec<_>>>()
            .map_or(IndexState::Unreadable, IndexState::Listed),
        RecordText::Foreign => IndexState::Unreadable,
    })
}

/// Cursor files are overwritten in place, so the content is padded to a fixed width
/// (longer than any address) and a shorter address never leaves a longer one's tail.
const CURSOR_WIDTH: usize = 48;

pub(crate) fn cursor_record(a: IpAddr) -> Vec<u8> {
    let mut text = format!("{a:<width$}", width = CURSOR_WIDTH - 1);
    text.push('\n');
    text.into_bytes()
}

/// The last address handed out in `family`'s range set; a hint, so anything unreadable
/// counts as "no cursor".
pub(crate) fn read_cursor(layout: &Layout, family: Family) -> io::Result<Option<IpAddr>> {
    Ok(fsio::read_if_exists(&layout.cursor(family))?
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .and_then(|text| text.trim().parse().ok()))
}
