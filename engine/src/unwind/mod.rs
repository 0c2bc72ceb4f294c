//! The unwind table: one normalized, immutable table per binary, whatever the source format.
//!
//! Builders ([`build`]) evaluate each source's CFI once and push address ranges with their
//! [`rule::RuleRecord`]; the [`builders::TableWriter`] resolves overlaps, fills gaps with
//! explicit no-rule rows, merges equal neighbours, deduplicates rules into a palette and
//! writes the bytes ([`format`]). [`lookup::UnwindTable`] answers from those bytes directly.
//! The same bytes are what the service stores in its database and caches.

pub mod builders;
pub mod compact;
mod error;
pub mod format;
pub mod lookup;
pub mod on_demand;
pub mod on_demand_pdata;
pub mod rule;
pub mod sframe;
pub mod win_frame;

pub use builders::{build_from_elf, BuildStats, BuiltTable, TableWriter};
pub use error::UnwindError;
pub use format::UNWIND_TABLE_VERSION;
pub use lookup::{Rule, UnwindTable};
pub use on_demand::OnDemandUnwind;
pub use rule::{RuleRecord, Slot, SlotKind, UnwindSource};
