//! One module per subcommand.

pub mod bench;
pub mod files;
pub mod walk;
