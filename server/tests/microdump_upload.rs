//! The service takes a Breakpad microdump in a logcat upload and walks it as gdb walks
//! the core of the same crash (issue 39).
//!
//! Breakpad's own microdump files cannot be committed, and its writer runs only inside a
//! crashing Android process. So the crash is made at test time: `basic.c` built by
//! `aarch64-linux-gnu-gcc -g -no-pie`, crashed under `qemu-aarch64-static`, whose core
//! gdb-multiarch reads (the reference); the microdump is written from that core's crashed
//! thread, stack memory and modules in Breakpad's record format
//! ([`postmortem_testsupport::microdump`]) and wrapped in `adb logcat -v brief` lines.
//! The program and the cross libc's files are uploaded as binaries, matched to the
//! microdump's modules by the Breakpad debug ids of their build-ids; the logcat is
//! uploaded as a crash. The report's one thread must be gdb's crashed thread frame for
//! frame (pc, function, inlined calls, file and line; [`compare::assert_same_stacks`]),
//! every frame found inside the 32 KiB of stack the microdump holds. `postmortem walk` of
//! the same log, the binaries under `--symbols`, must give the same frames.
//!
//! Skipped, saying so, without the cross tools (`test.sh` installs them).

use postmortem_testsupport::compare;
use postmortem_testsupport::gdb::GdbCore;
use postmortem_testsupport::microdump;
use postmortem_testsupport::program::Workdir;
use postmortem_testsupport::qemu::{self, CC, SYSROOT};
use postmortem_testsupport::report;

use crate::common;

const SIGSEGV: u64 = 11;

/// gdb's view of the core with only its crashed thread, given the microdump's thread id
/// (0: a microdump names no thread).
pub(crate) fn crashed_thread_only(gdb: &GdbCore) -> GdbCore {
    let mut thread = gdb.crashed().clone();
    thread.lwp = 0;
    GdbCore {
        crashed_lwp: Some(0),
        signal: gdb.signal,
        threads: vec![thread],
        solibs: gdb.solibs.clone(),
    }
}

/// `basic.c` crashed under QEMU, gdb's walk of its core, and the microdump of it.
struct Crashed {
    work: Workdir,
    gdb: GdbCore,
    names: Vec<String>,
    /// The program, libc and ld.so, as the microdump's modules name them.
    files: Vec<std::path::PathBuf>,
    logcat: String,
}

/// Builds and crashes `basic.c` (`aarch64-linux-gnu-gcc -no-pie -O2`), takes gdb's walk
/// of the core and writes the microdump of the crash as a logcat (`crash.log`); `None`
/// without the cross tools.
fn crash_basic(name: &str) -> Option<Crashed> {
    crash_basic_as(name, false)
}

/// [`crash_basic`]; with `pie`, the program position-independent (`-fPIE -pie`, as every
/// Android program is) and gdb's walk taken from the live process at its fault (gdb cannot
/// relocate a PIE from QEMU's core).
fn crash_basic_as(name: &str, pie: bool) -> Option<Crashed> {
    if !qemu::tools_present() {
        eprintln!("skipped: the aarch64 cross tools are not installed (see test.sh)");
        return None;
    }
    let work = Workdir::new(name);
    let flags: &[&str] = if pie {
        &["-fPIE", "-pie", "-O2"]
    } else {
        &["-no-pie", "-O2"]
    };
    let exe = work.compile(CC, flags, &["basic.c"], "basic");
    let (core, gdb) = qemu::crash_aarch64_with_gdb(work.path(), &exe, pie);
    let names: Vec<String> = gdb
        .crashed()
        .frames
        .iter()
        .filter_map(|f| f.name.clone())
        .collect();
    assert!(
        names.starts_with(&["crash_here", "middle", "outer", "main"].map(String::from))
            && gdb.crashed().complete,
        "gdb's stack: {names:?}, stopped: {}",
        gdb.crashed().stop
    );
    let dir = work.path().to_path_buf();
    let written = microdump::from_core(&std::fs::read(&core).unwrap(), |path| {
        qemu::module_file(&dir, path)
    });
    let files: Vec<_> = written
        .modules
        .iter()
        .map(|(path, _)| qemu::module_file(&dir, path).unwrap())
        .collect();
    assert!(
        files.iter().any(|f| f == &exe) && files.iter().any(|f| f.ends_with("libc.so.6")),
        "the microdump lists the program and libc: {:?}",
        written.modules
    );
    assert_eq!(
        written.pc,
        gdb.crashed().frames[0].pc,
        "the microdump's context is the crashed thread's"
    );
    let logcat = written.logcat_brief(4321);
    std::fs::write(work.path().join("crash.log"), &logcat).unwrap();
    Some(Crashed {
        work,
        gdb,
        names,
        files,
        logcat,
    })
}

/// Uploads `files` as binaries to `server`.
async fn upload_files(
    client: &reqwest::Client,
    server: &common::TempServer,
    files: &[std::path::PathBuf],
) {
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        common::upload_binary(client, &server.base, file, &name).await;
    }
}

/// Uploads the logcat, waits for its report and checks it is the microdump's, every
/// uploaded module found (`ok`).
async fn report_of(
    client: &reqwest::Client,
    server: &common::TempServer,
    crashed: &Crashed,
) -> serde_json::Value {
    let id = common::upload_crash(client, &server.base, crashed.logcat.as_bytes()).await;
    let record = common::poll_done(client, &server.base, &id).await;
    assert_eq!(record["status"], "done", "{record:#}");
    let report = record["report"].clone();
    assert_eq!(report["dump"]["format"], "microdump", "{report:#}");
    assert_eq!(report["dump"]["arch"], "aarch64");
    assert_eq!(report["crash"]["signal"].as_u64(), Some(SIGSEGV));
    for m in report["modules"].as_array().expect("modules") {
        let listed = crashed.files.iter().any(|f| {
            f.file_name()
                .is_some_and(|n| m["name"] == n.to_string_lossy().as_ref())
        });
        if listed {
            assert_eq!(m["status"], "ok", "an uploaded module: {m}");
        }
    }
    report
}

#[tokio::test]
async fn the_service_walks_a_logcat_microdump_as_gdb_walks_the_core() {
    if let Some(crashed) = crash_basic("microdump-basic") {
        walks_as_gdb(&crashed).await;
    }
}

/// A position-independent program, as every Android program is: its microdump's module
/// record says where the system loaded it.
#[tokio::test]
async fn the_service_walks_a_pie_logcat_microdump_as_gdb_walks_the_process() {
    if let Some(crashed) = crash_basic_as("microdump-pie", true) {
        walks_as_gdb(&crashed).await;
    }
}

/// The service's report of the crash's logcat, and `postmortem walk` of it with the
/// binaries under `--symbols`, give gdb's frames.
async fn walks_as_gdb(crashed: &Crashed) {
    let (work, gdb, names) = (&crashed.work, &crashed.gdb, &crashed.names);
    let server = common::TempServer::start(&[]);
    let client = common::client();
    upload_files(&client, &server, &crashed.files).await;
    let report = &report_of(&client, &server, crashed).await;
    let threads = report["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), 1, "a microdump holds the crashed thread");
    assert_eq!(threads[0]["crashed"], true);
    // shown with --nocapture
    eprintln!("gdb: {names:?}; ours: {}", threads[0]["frames"]);
    compare::assert_same_stacks(&crashed_thread_only(gdb), report);

    // the same log on the command line, the binaries under --symbols, found by the
    // debug ids of their build-ids
    let lib = std::path::Path::new(SYSROOT).join("lib");
    let (walked, _) = report::walk_report(
        std::process::Command::new(common::bin())
            .arg("walk")
            .arg(work.path().join("crash.log"))
            .arg("--symbols")
            .arg(work.path())
            .arg("--symbols")
            .arg(&lib)
            .args(["--format", "json"]),
    );
    assert_eq!(walked["dump"]["format"], "microdump");
    for m in walked["modules"].as_array().expect("modules") {
        if m["name"] == "basic" || m["name"] == "libc.so.6" {
            assert_eq!(m["verified"], true, "matched by its debug id: {m}");
        }
    }
    compare::assert_same_stacks(&crashed_thread_only(gdb), &walked);
}

/// A store whose ELF files were uploaded before `identify` derived their debug ids
/// (their rows' `debug_id` NULL, migration 0040 not applied), opened by this code: the
/// server migrates it at start (0040 fills the ids from the build-ids), and a microdump
/// then finds the files uploaded before, every module `ok` and the walk gdb's. Without
/// 0040 the modules stay `missing` until the files are uploaded again.
#[tokio::test]
async fn a_store_from_before_elf_debug_ids_finds_its_files_for_a_microdump() {
    let Some(crashed) = crash_basic("microdump-old-store") else {
        return;
    };
    let server = common::TempServer::start(&[]);
    let client = common::client();
    upload_files(&client, &server, &crashed.files).await;
    let dir = server.stop();
    // the rows as the code before the debug ids wrote them, in a store 0040 never ran on
    let db = worker::store::Db::connect(&format!(
        "sqlite://{}",
        dir.path().join("data/postmortem.db").display()
    ))
    .await
    .unwrap();
    let cleared = worker::on_pool!(&db, p => sqlx::query(
        "UPDATE binaries SET debug_id = NULL WHERE format = 'elf'").execute(p).await
        .map(|r| r.rows_affected()))
    .unwrap();
    assert_eq!(
        cleared,
        crashed.files.len() as u64,
        "the uploaded ELF files"
    );
    worker::on_pool!(&db, p => sqlx::query(
        "DELETE FROM _sqlx_migrations WHERE version = 40").execute(p).await.map(|_| ()))
    .unwrap();
    db.close().await;

    let server = common::TempServer::start_in(dir, &[]);
    let report = report_of(&client, &server, &crashed).await;
    compare::assert_same_stacks(&crashed_thread_only(&crashed.gdb), &report);
}
