//! How a command fails, and the exit status each failure gives (documented in `--help`):
//! 0 ok, 1 invalid data, 2 usage, 3 I/O (including a file that is not a tessera database).

/// Exit status for invalid data: malformed input, a damaged file, rejected records.
pub const EXIT_INVALID: u8 = 1;
/// Exit status for a usage error: bad arguments, an unknown collection, a query that does not
/// parse (clap uses 2 for its own usage errors too).
pub const EXIT_USAGE: u8 = 2;
/// Exit status for an I/O error: a file that cannot be read or written, is not a tessera
/// database or document, or is damaged.
pub const EXIT_IO: u8 = 3;

/// A command's failure: the message printed on standard error, and its class.
#[derive(Debug)]
pub enum Failure {
    /// Exit status 1.
    Invalid(String),
    /// Exit status 2.
    Usage(String),
    /// Exit status 3.
    Io(String),
    /// The reason was printed already; exit with this status.
    Reported(u8),
}

impl Failure {
    /// The process exit status.
    pub fn exit_status(&self) -> u8 {
        match self {
            Failure::Invalid(_) => EXIT_INVALID,
            Failure::Usage(_) => EXIT_USAGE,
            Failure::Io(_) => EXIT_IO,
            Failure::Reported(status) => *status,
        }
    }

    /// The message, if it was not printed yet.
    pub fn message(&self) -> Option<&str> {
        match self {
            Failure::Invalid(message) | Failure::Usage(message) | Failure::Io(message) => Some(message),
            Failure::Reported(_) => None,
        }
    }

    /// A library error, classed by what it says went wrong, with `context` (a file or a
    /// collection) before it.
    pub fn from_error(context: &str, error: tessera::Error) -> Failure {
        use tessera::Error;
        let message = if context.is_empty() { error.to_string() } else { format!("{context}: {error}") };
        match error {
            Error::Io(_)
            | Error::DiskFull
            | Error::MapFull { .. }
            | Error::AlreadyOpen(_)
            | Error::StillOpen { .. }
            | Error::ReadOnly { .. }
            | Error::NotADatabase { .. }
            | Error::ForeignDatabase { .. }
            | Error::UnsupportedVersion { .. } => Failure::Io(message),
            // Stored bytes that fail their checksum or do not decode: a damaged file, which
            // is as unreadable as a foreign one. (`check` reports damage as exit status 1.)
            Error::Corrupted(reason) if !context.is_empty() => Failure::Io(format!("damaged tessera database: {context}: {reason}")),
            Error::Corrupted(_) | Error::RecordDecode { .. } | Error::Format(_) => {
                Failure::Io(format!("damaged tessera database: {message}"))
            }
            Error::NoSuchCollection { .. }
            | Error::Query(_)
            | Error::InvalidName { .. }
            | Error::QueryTooDeep { .. }
            | Error::UnknownField { .. } => Failure::Usage(message),
            _ => Failure::Invalid(message),
        }
    }
}

/// `Result` with a [`Failure`].
pub type Outcome<T = ()> = Result<T, Failure>;

/// Writing to standard output or a file failed.
pub fn write_failed(what: &str, error: std::io::Error) -> Failure {
    Failure::Io(format!("cannot write {what}: {error}"))
}
