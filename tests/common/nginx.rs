//! A real nginx in front of a fleet, run with the shipped `deploy/nginx/nginx.conf` (the file
//! `deploy/compose.yaml` and `tests/interop/fleet.sh` run): the includes it names
//! (`upstreams.conf`, `listen-grpc.conf`, `listen-http.conf`) are written into a prefix
//! directory of its own beside a symlink to the shared file, with the replicas' loopback ports
//! and two free ports for nginx, as the file's header says. Killed on drop.
//!
//! Without an nginx binary the tests skip loudly, except in CI (`CI=true`), where it is a failure.
#![allow(dead_code)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The nginx binary: `$NGINX`, else `nginx` on the PATH, else `/usr/sbin/nginx` (Debian puts
/// it outside an ordinary user's PATH).
pub fn binary() -> Option<PathBuf> {
    let runs = |path: &Path| Command::new(path).arg("-v").output().is_ok_and(|o| o.status.success());
    let candidates =
        [std::env::var_os("NGINX").map(PathBuf::from), Some("nginx".into()), Some("/usr/sbin/nginx".into())];
    candidates.into_iter().flatten().find(|path| runs(path))
}

/// `true` if nginx can run here; otherwise says so loudly (or panics in CI).
pub fn available() -> bool {
    let found = binary().is_some();
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("nginx is not installed, and CI=true: the fleet fault suite must run in CI");
        }
        let loud = b"\n*** SKIPPED: nginx not installed (apt-get install nginx-light) ***\n\n";
        let _ = std::io::stderr().write_all(loud);
    }
    found
}

/// A port on 127.0.0.1 that is free now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap()
}

/// One nginx process balancing gRPC and HTTP over the given replica ports.
pub struct Nginx {
    /// Its gRPC (h2c) port.
    pub grpc_port: u16,
    /// Its HTTP/1.1 port (JSON-RPC, HTTP+JSON, SSE).
    pub http_port: u16,
    prefix: PathBuf,
    child: Child,
}

impl Nginx {
    /// nginx over `replica_ports` (on 127.0.0.1), or `None` (after the loud message) without it.
    /// Panics with nginx's own words if it rejects the configuration.
    pub fn start(replica_ports: &[u16]) -> Option<Self> {
        if !available() {
            return None;
        }
        let binary = binary().unwrap();
        let (grpc_port, http_port) = (free_port(), free_port());
        let prefix = std::env::temp_dir().join(format!("a2a-nginx-{}-{grpc_port}", std::process::id()));
        std::fs::create_dir_all(prefix.join("tmp")).unwrap();
        // nginx's workers may run as another user when started as root: they must reach the
        // prefix's temp directories.
        let _ = Command::new("chmod").arg("755").arg(&prefix).status();
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/nginx/nginx.conf");
        // A symlink, not a copy: nginx resolves `include` against the directory of the path it
        // was given, so the shared file picks up the generated files next to the link.
        let conf = prefix.join("nginx.conf");
        std::os::unix::fs::symlink(&shipped, &conf).unwrap();
        std::fs::write(prefix.join("listen-grpc.conf"), format!("listen 127.0.0.1:{grpc_port} http2;\n"))
            .unwrap();
        std::fs::write(prefix.join("listen-http.conf"), format!("listen 127.0.0.1:{http_port};\n")).unwrap();
        std::fs::write(prefix.join("upstreams.conf"), upstreams(replica_ports)).unwrap();

        let check = Command::new(&binary)
            .args(["-t", "-q", "-e", "stderr", "-c"])
            .arg(&conf)
            .arg("-p")
            .arg(format!("{}/", prefix.display()))
            .output()
            .expect("nginx -t runs");
        assert!(
            check.status.success(),
            "nginx -t rejected deploy/nginx/nginx.conf with the generated includes:\n{}",
            String::from_utf8_lossy(&check.stderr)
        );
        let log = std::fs::File::create(prefix.join("nginx.log")).unwrap();
        let child = Command::new(&binary)
            .args(["-e", "stderr", "-c"])
            .arg(&conf)
            .arg("-p")
            .arg(format!("{}/", prefix.display()))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("nginx starts");
        let nginx = Self { grpc_port, http_port, prefix, child };
        let deadline = Instant::now() + Duration::from_secs(20);
        for port in [grpc_port, http_port] {
            while TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(Instant::now() < deadline, "nginx does not listen on {port}:\n{}", nginx.log());
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Some(nginx)
    }

    /// `http://127.0.0.1:<grpc port>`, for tonic.
    pub fn grpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// `http://127.0.0.1:<http port>`.
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// What nginx logged (warnings and errors: the shipped file logs at `warn`).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.prefix.join("nginx.log")).unwrap_or_default()
    }
}

/// The `upstreams.conf` the shipped file includes: both upstreams over every replica, as
/// `tests/interop/fleet.sh` writes it.
fn upstreams(replica_ports: &[u16]) -> String {
    let mut conf = String::new();
    for name in ["a2a_grpc", "a2a_http"] {
        conf.push_str(&format!("upstream {name} {{\n"));
        for port in replica_ports {
            conf.push_str(&format!("    server 127.0.0.1:{port} max_fails=0;\n"));
        }
        conf.push_str("    keepalive 16;\n}\n");
    }
    conf
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM is nginx's fast shutdown: the master stops its worker and exits. SIGKILL
        // would leave the worker behind, listening.
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.prefix);
    }
}
