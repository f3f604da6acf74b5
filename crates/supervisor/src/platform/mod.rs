//! The operating-system mechanisms under the supervisor's promises, one module per
//! concern, each with its Linux and its macOS implementation side by side and a doc
//! comment saying what each guarantees. Code outside `platform` names no OS.
//!
//! ARCHITECTURE.md has the table of promises × Linux mechanism × macOS mechanism × where
//! each is tested; README.md and SECURITY.md say where macOS promises less.

pub mod escape;
pub mod nofile;
pub mod parent_death;
pub mod port_owner;
pub mod procs;
