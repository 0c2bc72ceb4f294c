//! Remote symbol sources: a module's files fetched by build-id from debuginfod servers
//! when nothing on hand describes it, the way gdb and eu-stack fetch them
//! (`DEBUGINFOD_URLS`), and `.sym` files from Breakpad symbol stores, the way
//! minidump-stackwalk does (`--symbols-url`). Nobody uploads their distribution's libc, yet most crashes pass
//! through it; distributions serve the executable and debug file of every package.
//!
//! - [`config`]: which servers, and the limits their fetches obey (timeouts, size cap, how
//!   long a miss is remembered), from flags and elfutils' environment variables.
//! - [`sources_file`]: the sources listed in a file, in order, each with its own limits.
//! - [`http`]: one server's answer for one file, streamed to disk, told apart as found,
//!   not found, or an error (unreachable, slow, 5xx, cut short, too large).
//! - [`redirect`]: which redirects a source may send a fetch to (its own origin; other
//!   hosts over https at public addresses only).
//! - [`redact`]: a source URL's one display form, credentials hidden, for reports,
//!   metrics, logs and errors.
//! - [`cabinet`]: a symbol server's compressed file (`NAME.pd_`, a CAB archive), its one
//!   file taken out, bounded by the size cap.
//! - [`s3`]: S3-compatible buckets in any of those layouts, each object asked at a
//!   presigned URL over the same HTTP path (no async runtime, no S3 SDK).
//! - [`check`]: a fetched file is used only if its build-id (or a `.sym` file's debug-id)
//!   is the one asked for.
//! - [`cache`]: fetched files and misses kept on disk, so the next walk asks nothing.
//! - [`source_link`]: source-link mappings, a path prefix to a URL template with the
//!   build's commit: a frame's source file fetched from its repository, and its link.
//! - [`remote`]: the servers in order, behind the cache — debuginfod servers for a build's
//!   executable and debug file, Breakpad symbol stores for `.sym` files — with what each
//!   answered as the report's `modules[].lookups`.
//!
//! Blocking I/O (`ureq`): the walk programs have no async runtime, and the service calls
//! this on a blocking thread.

pub mod cabinet;
pub mod cache;
pub mod check;
pub mod config;
pub mod http;
pub mod redact;
pub mod redirect;
pub mod remote;
pub mod s3;
pub mod source_link;
pub mod sources_file;

pub use config::Config;
pub use remote::Remote;
