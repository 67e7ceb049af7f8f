//! Whole-table operations: atomic replace and consistent readback.

use crate::batch::Batch;
use crate::error::Error;
use crate::model::{ChainSpec, Family, Table, TableSpec};
use crate::socket::NftSocket;

/// Reads retried when the ruleset changes underneath them.
const READ_ATTEMPTS: u32 = 10;

impl NftSocket {
    /// Replaces the whole table with `spec` in one transaction: create it if missing,
    /// delete it, add it again with its chains and rules. Other tables are untouched;
    /// if any message is refused, the previous table stays exactly as it was.
    pub fn replace_table(&self, spec: &TableSpec) -> Result<(), Error> {
        replace_batch(spec).send(self)
    }

    /// Deletes a table if it exists (idempotent), in one transaction.
    pub fn delete_table_if_exists(&self, family: Family, name: &str) -> Result<(), Error> {
        let mut batch = Batch::new();
        // Create-then-delete works on every kernel; NFT_MSG_DESTROYTABLE needs 6.3.
        batch
            .add_table(&Table::new(family, name))
            .delete_table(family, name);
        batch.send(self)
    }

    /// Reads a table back whole, in [`TableSpec::normalized`] form, or `None` when it
    /// does not exist. The reads are bracketed by the ruleset generation and repeated
    /// if it moved, so the result is one consistent state of the kernel.
    pub fn read_table(&self, family: Family, name: &str) -> Result<Option<TableSpec>, Error> {
        let what = format!("read table {family} {name}");
        for _ in 0..READ_ATTEMPTS {
            let before = self.generation()?;
            let spec = self.read_table_once(&what, family, name);
            // A concurrent change can also make the reads disagree with each other
            // (a rule in a chain the chain dump did not see): retry those too.
            if self.generation()? == before {
                return spec;
            }
        }
        Err(Error::Unstable {
            what,
            attempts: READ_ATTEMPTS,
        })
    }

    fn read_table_once(
        &self,
        what: &str,
        family: Family,
        name: &str,
    ) -> Result<Option<TableSpec>, Error> {
        let Some(table) = self
            .list_tables()?
            .into_iter()
            .find(|t| t.family == family && t.name == name)
        else {
            return Ok(None);
        };
        let mut chains: Vec<ChainSpec> = self
            .list_chains(Some(family))?
            .into_iter()
            .filter(|c| c.family == family && c.table == name)
            .map(|c| ChainSpec {
                chain: c.chain,
                rules: Vec::new(),
            })
            .collect();
        for (chain_name, rule) in self.table_rules(what, family, name, None)? {
            match chains.iter_mut().find(|c| c.chain.name == chain_name) {
                Some(chain) => chain.rules.push(rule),
                None => {
                    return Err(Error::Malformed {
                        what: what.to_string(),
                        reason: format!("rule in chain {chain_name}, which was not listed"),
                    })
                }
            }
        }
        Ok(Some(TableSpec { table, chains }.normalized()))
    }
}

/// The batch [`NftSocket::replace_table`] sends, exposed so callers can add to the
/// same transaction.
pub fn replace_batch(spec: &TableSpec) -> Batch {
    let table = &spec.table;
    let mut batch = Batch::new();
    batch
        .add_table(&Table::new(table.family, &table.name))
        .delete_table(table.family, &table.name)
        .add_table(table);
    add_contents(&mut batch, spec);
    batch
}

/// A batch that creates the table with its chains and rules in a namespace that has no
/// such table. It deletes nothing, so the kernel commits it without the grace period a
/// deleting transaction waits for (milliseconds on a busy machine); it fails (EEXIST)
/// rather than replace a table that is already there.
pub fn create_batch(spec: &TableSpec) -> Batch {
    let mut batch = Batch::new();
    batch.add_table(&spec.table);
    add_contents(&mut batch, spec);
    batch
}

fn add_contents(batch: &mut Batch, spec: &TableSpec) {
    let table = &spec.table;
    for c in &spec.chains {
        batch.add_chain(table.family, &table.name, &c.chain);
    }
    for c in &spec.chains {
        for rule in &c.rules {
            batch.add_rule(table.family, &table.name, &c.chain.name, rule);
        }
    }
}
