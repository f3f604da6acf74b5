//! The event journal: every event appended to `.corral/events.jsonl`, one JSON object per
//! line, rotated to `events.jsonl.1` at a fixed size, so a crash and its stderr tail are
//! still there after the daemon restarts.

use corral_events::{Event, EventBus};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
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
                Err(RecvError::Lagged(n)) => {
                    journal.append(&Event::new("journal.lagged", "corral").with("dropped", n))
                }
                Err(RecvError::Closed) => return,
            }
        }
    })
}

struct Journal {
    path: PathBuf,
    file: Option<File>,
    size: u64,
}

impl Journal {
    fn open(path: &Path) -> Journal {
        let file = OpenOptions::new().create(true).append(true).open(path).ok();
        let size = file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        Journal {
            path: path.to_owned(),
            file,
            size,
        }
    }

    fn append(&mut self, ev: &Event) {
        if self.size >= ROTATE_BYTES {
            let mut old = self.path.clone().into_os_string();
            old.push(".1");
            let _ = std::fs::rename(&self.path, &old);
            *self = Journal::open(&self.path);
        }
        let mut line = ev.to_json_line();
        line.push('\n');
        if let Some(f) = &mut self.file
            && f.write_all(line.as_bytes()).is_ok()
        {
            self.size += line.len() as u64;
        }
    }
}

/// The last `n` events of the journal (including its rotated predecessor when the
/// current file has fewer), oldest first. Lines that do not parse are skipped.
pub fn tail(path: &Path, n: usize) -> Vec<Event> {
    let mut events = read_tail(path, n);
    if events.len() < n {
        let mut old = path.to_owned().into_os_string();
        old.push(".1");
        let mut earlier = read_tail(Path::new(&old), n - events.len());
        earlier.append(&mut events);
        events = earlier;
    }
    events
}

fn read_tail(path: &Path, n: usize) -> Vec<Event> {
    let Ok(mut f) = File::open(path) else {
        return Vec::new();
    };
    // Read at most the last 4 MiB: plenty for the lines asked for.
    let len = f.metadata().map_or(0, |m| m.len());
    let start = len.saturating_sub(4 * 1024 * 1024);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return Vec::new();
    }
    let mut lines: Vec<Event> = BufReader::new(f)
        .lines()
        .skip(usize::from(start > 0))
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    let skip = lines.len().saturating_sub(n);
    lines.drain(..skip);
    lines
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
            bus.emit(Event::new("server.crashed", "server:a").with("n", i));
        }
        drop(bus);
        writer.await.unwrap();
        let tail = tail(&path, 3);
        assert_eq!(tail.len(), 3);
        assert_eq!(tail[2].data["n"], 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
