//! The flags of a dump's memory budget (threads walked, frames in all, report size,
//! modules),
//! shared by `postmortem walk`, `serve` and `worker`, so that a hostile dump costs the
//! same bounded memory whichever of them reads it.

use engine::report::budget::Budget;

#[derive(clap::Args, Debug, Clone)]
pub struct BudgetArgs {
    /// Most threads of one dump walked (the crashed thread first); the rest are left out
    /// of the report, with a `threads-cut` warning.
    #[arg(long, default_value_t = Budget::default().max_threads)]
    pub max_threads: usize,
    /// Most frames of one dump, all threads together; walks past it stop early (a thread
    /// walked after it is spent shows its context frame only), with a `frames-cut`
    /// warning.
    #[arg(long, default_value_t = Budget::default().max_total_frames)]
    pub max_total_frames: usize,
    /// Most MiB of one report's JSON; the outermost frames of the last threads go first,
    /// with a `report-cut` warning.
    #[arg(long, default_value_t = (Budget::default().max_report_bytes >> 20) as u64)]
    pub max_report_mb: u64,
    /// Most modules of one dump looked up, walked and reported (those the threads run
    /// in first, then the main executable, then by address); the rest are left out, with
    /// a `modules-cut` warning.
    #[arg(long, default_value_t = Budget::default().max_modules)]
    pub max_modules: usize,
    /// Most records (lines) of one Breakpad `.sym` file built into tables; the rest are
    /// left out, with a `sym-records-cut` warning.
    #[arg(long, default_value_t = Budget::default().max_sym_records)]
    pub max_sym_records: usize,
}

impl BudgetArgs {
    /// The engine's budget.
    pub fn budget(&self) -> Budget {
        let mut budget = Budget::default();
        budget.max_threads = self.max_threads.max(1);
        budget.max_total_frames = self.max_total_frames.max(1);
        budget.max_report_bytes =
            usize::try_from(self.max_report_mb.max(1).saturating_mul(1 << 20))
                .unwrap_or(usize::MAX);
        budget.max_modules = self.max_modules.max(1);
        budget.max_sym_records = self.max_sym_records.max(1);
        budget
    }
}
