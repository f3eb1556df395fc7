//! A throwaway PostgreSQL server for tests and benchmarks: `initdb` and `pg_ctl start` in a
//! temporary directory, on a free loopback port with its socket in that directory, stopped
//! (`pg_ctl stop -m immediate`) and removed on drop. PostgreSQL refuses to run as root: as
//! root, the directory is given to the `postgres` user and the tools run through `runuser`.
//! The tools are found on `PATH` or in `/usr/lib/postgresql/*/bin` (Debian's package).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why the server could not be made, started or stopped.
///
/// ```
/// let error = tessera_postgres::ServerError::ToolMissing { tool: "initdb" };
/// assert!(error.to_string().contains("initdb"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// `initdb` or `pg_ctl` is neither on `PATH` nor in `/usr/lib/postgresql/*/bin`.
    #[error("{tool} is neither on PATH nor in /usr/lib/postgresql/*/bin (install PostgreSQL)")]
    ToolMissing {
        /// The tool.
        tool: &'static str,
    },
    /// A tool failed.
    #[error("{command} failed ({status}): {output}")]
    Failed {
        /// What ran.
        command: String,
        /// Its exit status.
        status: String,
        /// Its output, and the server log's end where there is one.
        output: String,
    },
    /// The file system or a process start failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// A PostgreSQL server of its own, for a test or a benchmark.
///
/// ```no_run
/// let server = tessera_postgres::TempPostgres::start()?;
/// let mut client = postgres::Client::connect(&server.url(), postgres::NoTls)?;
/// assert_eq!(client.query_one("SELECT 1", &[])?.get::<_, i32>(0), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct TempPostgres {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    as_postgres_user: bool,
    running: bool,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServerError {
    let what = what.into();
    move |source| ServerError::Io { what, source }
}

/// The directory holding `initdb` and `pg_ctl`.
fn bin_dir() -> Result<PathBuf, ServerError> {
    let on_path = std::env::var_os("PATH").map(|path| std::env::split_paths(&path).collect::<Vec<_>>()).unwrap_or_default();
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.filter_map(|entry| entry.ok()).map(|entry| entry.path().join("bin")).collect())
        .unwrap_or_default();
    // The newest version first.
    debian.sort_by_key(|dir| std::cmp::Reverse(dir.parent().and_then(|version| version.file_name()?.to_str()?.parse::<u32>().ok())));
    for dir in on_path.into_iter().chain(debian) {
        if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
            return Ok(dir);
        }
    }
    let tool = if which_on_path("initdb") { "pg_ctl" } else { "initdb" };
    Err(ServerError::ToolMissing { tool })
}

fn which_on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|output| output.stdout.trim_ascii() == b"0")
}

fn free_port() -> Result<u16, ServerError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("binding a loopback port"))?;
    Ok(listener.local_addr().map_err(io("reading the bound port"))?.port())
}

impl TempPostgres {
    /// Makes and starts a server (fsync off: a test's data need not survive a power loss).
    ///
    /// ```no_run
    /// let server = tessera_postgres::TempPostgres::start()?;
    /// let mut client = postgres::Client::connect(&server.url(), postgres::NoTls)?;
    /// assert_eq!(client.query_one("SHOW fsync", &[])?.get::<_, String>(0), "off");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start() -> Result<TempPostgres, ServerError> {
        TempPostgres::start_with(false)
    }

    /// Makes and starts a server; `fsync`: whether it syncs its writes (on for benchmarks).
    ///
    /// ```no_run
    /// let server = tessera_postgres::TempPostgres::start_with(true)?; // for a benchmark
    /// let mut client = postgres::Client::connect(&server.url(), postgres::NoTls)?;
    /// assert_eq!(client.query_one("SHOW fsync", &[])?.get::<_, String>(0), "on");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_with(fsync: bool) -> Result<TempPostgres, ServerError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let bin = bin_dir()?;
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.subsec_nanos());
        let name = format!("tessera-pg-{}-{}-{nanos}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let mut server = TempPostgres { dir, bin, port: free_port()?, as_postgres_user: is_root(), running: false };
        if server.as_postgres_user {
            server.run("chown", Command::new("chown").args(["-R", "postgres:postgres"]).arg(&server.dir))?;
        }
        let data = server.data_dir();
        let mut initdb = server.tool("initdb");
        initdb.arg("-D").arg(&data).args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]);
        server.run("initdb", &mut initdb)?;
        // A test's server is small (several run at once); a benchmark's keeps the defaults.
        let (fsync, small) = if fsync { ("on", "") } else { ("off", "shared_buffers = 16MB\n") };
        std::fs::write(
            data.join("postgresql.auto.conf"),
            format!(
                "listen_addresses = '127.0.0.1'\nport = {}\nunix_socket_directories = '{}'\nfsync = {fsync}\nmax_connections = 40\n{small}",
                server.port,
                server.dir.display()
            ),
        )
        .map_err(io("writing postgresql.auto.conf"))?;
        server.start_again()?;
        Ok(server)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log_file(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    fn tool(&self, tool: &str) -> Command {
        if self.as_postgres_user {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(self.bin.join(tool));
            command
        } else {
            Command::new(self.bin.join(tool))
        }
    }

    fn run(&self, what: &str, command: &mut Command) -> Result<(), ServerError> {
        let output = command.output().map_err(io(format!("running {what}")))?;
        if output.status.success() {
            return Ok(());
        }
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        if let Ok(log) = std::fs::read_to_string(self.log_file()) {
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            text.push_str("\nserver log:\n");
            text.push_str(&tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        }
        Err(ServerError::Failed { command: what.to_owned(), status: output.status.to_string(), output: text })
    }

    /// Starts the server again after [`TempPostgres::stop`] (same port and data).
    ///
    /// ```no_run
    /// let mut server = tessera_postgres::TempPostgres::start()?;
    /// server.stop()?;
    /// server.start_again()?;
    /// let mut client = postgres::Client::connect(&server.url(), postgres::NoTls)?;
    /// assert_eq!(client.query_one("SELECT 1", &[])?.get::<_, i32>(0), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_again(&mut self) -> Result<(), ServerError> {
        let mut pg_ctl = self.tool("pg_ctl");
        pg_ctl.arg("-D").arg(self.data_dir()).arg("-l").arg(self.log_file()).args(["-w", "-t", "30", "start"]);
        self.run("pg_ctl start", &mut pg_ctl)?;
        self.running = true;
        Ok(())
    }

    /// Stops the server at once (`-m immediate`: as a crash would).
    ///
    /// ```no_run
    /// let mut server = tessera_postgres::TempPostgres::start()?;
    /// server.stop()?;
    /// assert!(postgres::Client::connect(&server.url(), postgres::NoTls).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stop(&mut self) -> Result<(), ServerError> {
        let mut pg_ctl = self.tool("pg_ctl");
        pg_ctl.arg("-D").arg(self.data_dir()).args(["-m", "immediate", "-w", "stop"]);
        self.run("pg_ctl stop", &mut pg_ctl)?;
        self.running = false;
        Ok(())
    }

    /// The loopback port.
    ///
    /// ```no_run
    /// let server = tessera_postgres::TempPostgres::start()?;
    /// assert!(server.url().contains(&format!("port={}", server.port())));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of the data, the socket and the log.
    ///
    /// ```no_run
    /// let server = tessera_postgres::TempPostgres::start()?;
    /// let dir = server.dir().to_path_buf();
    /// assert!(dir.is_dir());
    /// drop(server);
    /// assert!(!dir.exists()); // removed on drop
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A connection string for the `postgres` database as user `postgres` (trust auth).
    ///
    /// ```no_run
    /// let server = tessera_postgres::TempPostgres::start()?;
    /// assert!(server.url().starts_with("host=127.0.0.1 port="));
    /// let mut client = postgres::Client::connect(&server.url(), postgres::NoTls)?;
    /// assert_eq!(client.query_one("SELECT current_user::text", &[])?.get::<_, String>(0), "postgres");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn url(&self) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=5", self.port)
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        if self.running {
            let _ = self.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
