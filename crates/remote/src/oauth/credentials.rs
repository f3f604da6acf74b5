//! A remote server's credentials as the daemon uses them: the bearer token on every
//! request, and one refresh at a time — in this process (every agent of the daemon
//! shares it: one `corral __remote` carries all of a server's traffic) and across
//! processes (the record's `flock`; the record re-read under it, so a refresh another
//! process made is used, not repeated). A rotated refresh token is on disk before the
//! new access token is used.

use super::store::{self, Record, Store};
use super::{Refused, refresh, refresh_point};
use hyper::header::HeaderValue;
use std::sync::Mutex;

/// The tokens in use.
struct Current {
    bearer: Option<HeaderValue>,
    generation: u64,
    refresh_at: Option<u64>,
    has_refresh: bool,
}

pub struct Credentials {
    store: Store,
    current: Mutex<Current>,
    /// One refresh at a time in this process.
    refreshing: tokio::sync::Mutex<()>,
    /// A refreshed record whose write failed: newer than the file (whose refresh token
    /// is spent), so it stands, and is written again at the next refresh.
    unsaved: Mutex<Option<Record>>,
}

impl Credentials {
    /// The credentials kept in `store` (none yet is fine: the server may not need any).
    pub fn open(store: Store) -> Result<Credentials, String> {
        let record = store.load().map_err(|e| e.to_string())?;
        let c = Credentials {
            store,
            current: Mutex::new(Current {
                bearer: None,
                generation: 0,
                refresh_at: None,
                has_refresh: false,
            }),
            refreshing: tokio::sync::Mutex::new(()),
            unsaved: Mutex::new(None),
        };
        if let Some(r) = record {
            c.adopt(&r);
        }
        Ok(c)
    }

    fn adopt(&self, r: &Record) {
        let mut c = self.current.lock().unwrap();
        c.generation = r.generation;
        c.bearer = r.tokens.as_ref().and_then(|t| {
            let mut v = HeaderValue::from_str(&format!("Bearer {}", t.access)).ok()?;
            v.set_sensitive(true);
            Some(v)
        });
        c.has_refresh = r.tokens.as_ref().is_some_and(|t| t.refresh.is_some());
        c.refresh_at = r.tokens.as_ref().and_then(refresh_point);
    }

    /// The `Authorization` value to send, and the generation it belongs to.
    pub fn bearer(&self) -> (Option<HeaderValue>, u64) {
        let c = self.current.lock().unwrap();
        (c.bearer.clone(), c.generation)
    }

    /// When (unix seconds) the tokens in use should be refreshed; `None` when they
    /// cannot be (no refresh token) or need not be (no expiry known).
    pub fn refresh_due(&self) -> Option<u64> {
        let c = self.current.lock().unwrap();
        c.refresh_at.filter(|_| c.has_refresh && c.bearer.is_some())
    }

    /// Newer tokens than generation `seen` (which the server refused, or which are due):
    /// someone else's when another refresh already made them, else a refresh.
    pub async fn renew(&self, seen: u64) -> Result<(), Refused> {
        let _one = self.refreshing.lock().await;
        if self.current.lock().unwrap().generation != seen {
            return Ok(());
        }
        let store = self.store.clone();
        let lock = tokio::task::spawn_blocking(move || store.lock())
            .await
            .map_err(|e| Refused::Transient(e.to_string()))?
            .map_err(|e| Refused::Transient(format!("cannot lock the credentials: {e}")))?;
        let unsaved = self.unsaved.lock().unwrap().take();
        let record = match unsaved {
            Some(r) => {
                self.save(&r);
                Some(r)
            }
            None => self
                .store
                .load()
                .map_err(|e| Refused::Rejected(e.to_string()))?,
        };
        let Some(mut record) = record else {
            return Err(Refused::Rejected("no credentials yet".into()));
        };
        if record.generation != seen {
            // Another process (another daemon, `corral auth`) changed them.
            self.adopt(&record);
            return if record.tokens.is_some() {
                Ok(())
            } else {
                Err(Refused::Rejected("the credentials were removed".into()))
            };
        }
        let Some(tokens) = record.tokens.as_ref() else {
            return Err(Refused::Rejected("no credentials yet".into()));
        };
        if tokens.refresh.is_none() {
            let expired = tokens.expires_at.is_some_and(|e| e <= store::now());
            return Err(Refused::Rejected(if expired {
                "the token expired and the grant has no refresh token".into()
            } else {
                "the server refused the token, and the grant has no refresh token".into()
            }));
        }
        match refresh(&record).await {
            Ok(new) => {
                record.tokens = Some(new);
                record.generation += 1;
                // Durable before use: a rotated refresh token that is not on disk is
                // lost to every other process (kept here, and written again, if the
                // write fails).
                self.save(&record);
                self.adopt(&record);
                drop(lock);
                Ok(())
            }
            Err(Refused::Rejected(why)) => {
                // Under the lock, with the generation unchanged, the refresh token sent
                // is the stored one: the grant is gone. The registration stays.
                record.tokens = None;
                record.generation += 1;
                let _ = self.store.save(&record);
                self.adopt(&record);
                Err(Refused::Rejected(why))
            }
            Err(t) => Err(t),
        }
    }

    /// Writes `record`; when that fails it is kept to be written at the next refresh.
    fn save(&self, record: &Record) {
        if let Err(e) = self.store.save(record) {
            eprintln!(
                "corral: cannot save the refreshed credentials to {}: {e}; using them in this \
                 process and writing them again at the next refresh",
                self.store.path().display()
            );
            *self.unsaved.lock().unwrap() = Some(record.clone());
        }
    }

    /// Remembers scopes a server asked for beyond the grant, for the next `corral auth`
    /// (off the async threads: the record's lock may be held through a refresh).
    pub async fn want_scope(&self, scope: &str) {
        let (store, scope) = (self.store.clone(), scope.to_owned());
        let _ = tokio::task::spawn_blocking(move || want_scope(&store, &scope)).await;
    }
}

fn want_scope(store: &Store, scope: &str) {
    {
        let Ok(_lock) = store.lock() else {
            return;
        };
        let Ok(Some(mut r)) = store.load() else {
            return;
        };
        let mut all: Vec<String> = r
            .tokens
            .as_ref()
            .and_then(|t| t.scope.clone())
            .into_iter()
            .chain(r.wanted_scope.clone())
            .chain([scope.to_owned()])
            .flat_map(|s| {
                s.split_ascii_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        all.sort();
        all.dedup();
        r.wanted_scope = Some(all.join(" "));
        let _ = store.save(&r);
    }
}
