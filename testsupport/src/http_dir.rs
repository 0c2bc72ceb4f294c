//! A directory served over HTTP by Python's `http.server` (a server that is not ours: the
//! symbol-server and compressed-file tests fetch from it), its request log kept, so a
//! test can say which paths were asked for; stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct HttpDir {
    child: Child,
    /// `http://127.0.0.1:PORT`, the directory's root.
    pub url: String,
    log: PathBuf,
}

impl HttpDir {
    /// Serves `dir` on a free port, its request log written to `log`; returns once the
    /// port answers. Panics if python3 cannot start it within 20 s (test.sh installs it).
    pub fn serve(dir: &Path, log: PathBuf) -> HttpDir {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let stderr =
            std::fs::File::create(&log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let child = Command::new("python3")
            .args(["-u", "-m", "http.server", "--bind", "127.0.0.1"])
            .arg(port.to_string())
            .arg("--directory")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("python3 -m http.server (python3: see test.sh)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "http.server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpDir {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    /// The paths asked for so far (`GET /PATH`), in order.
    pub fn asked(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split("\"GET ").nth(1))
            .filter_map(|l| l.split(' ').next())
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for HttpDir {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
