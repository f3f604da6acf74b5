//! The event journal: every event appended to `.corral/events.jsonl`, one JSON object per
//! line, rotated to `events.jsonl.1` at a fixed size, so a crash and its stderr tail are
//! still there after the daemon restarts.

use corral_events::{Event, EventBus, Kind, Source};
use corral_supervisor::stderr::LogFile;
use std::path::{Path, PathBuf};
use tokio::sync::broadcast::error::RecvError;

/// Size at which the journal is rotated.
pub const ROTATE_BYTES: u64 = 10 * 1024 * 1024;

/// Appends every event of `bus` to the journal at `path` until the bus closes.
pub fn spawn_writer(bus: &EventBus, path: PathBuf) -> tokio::task::JoinHandle<()> {
    let mut rx = bus.subscribe();
    tokio::spawn(async move {
        let mut journal = Journal::open(&path);
        loop {
            match rx.recv().await {
                Ok(ev) => journal.append(&ev),
                Err(RecvError::Lagged(n)) => journal
                    .append(&Event::new(Kind::JournalLagged, Source::Corral).with("dropped", n)),
                Err(RecvError::Closed) => return,
            }
        }
    })
}

/// The journal file: the supervisor's rotating log, flushed after every event so that
/// what is on disk is current when the daemon dies.
struct Journal(Option<LogFile>);

impl Journal {
    fn open(path: &Path) -> Journal {
        Journal(LogFile::open(path, ROTATE_BYTES).ok())
    }

    fn append(&mut self, ev: &Event) {
        if let Some(log) = &mut self.0 {
            log.write_line("", &ev.to_json_line());
            log.flush();
        }
    }
}

/// The last `n` events of the journal (including its rotated predecessor when the
/// current file has fewer), oldest first. Lines that do not parse are skipped.
pub fn tail(path: &Path, n: usize) -> Vec<Event> {
    corral_gateway::tools::history::journal_tail(path, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_are_appended_and_read_back() {
        let dir = std::env::temp_dir().join(format!("corral-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("events.jsonl");
        let _ = std::fs::remove_file(&path);
        let bus = EventBus::new(16);
        let writer = spawn_writer(&bus, path.clone());
        for i in 0..5 {
            bus.emit(Event::new(Kind::ServerCrashed, Source::server("a")).with("n", i));
        }
        drop(bus);
        writer.await.unwrap();
        let tail = tail(&path, 3);
        assert_eq!(tail.len(), 3);
        assert_eq!(tail[2].data["n"], 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
