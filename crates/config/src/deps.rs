//! `depends_on`: every name must exist, there must be no cycle, and the processes start
//! in an order where each comes after what it depends on.
//!
//! A process may depend on processes and on servers (a server is ready when its MCP
//! handshake is done); servers depend on nothing. Server dependencies do not constrain
//! the order among processes: the supervisor waits for them.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Problem;
use crate::model::{Config, ProcessConfig};
use crate::read::RawConfig;
use crate::tree::{Node, Value};

/// Reports every unknown name in a `depends_on` and every cycle among processes. The
/// names known are those written in `root` (corral.toml's tree), so a process or server
/// with a problem of its own is still a known name, not a second problem.
pub(crate) fn check(root: &Node, raw: &RawConfig, problems: &mut Vec<Problem>) {
    let names = |section: &str| -> BTreeSet<&str> {
        match root.get(section).map(|e| &e.node.value) {
            Some(Value::Table(entries)) => entries.iter().map(|e| e.key.as_str()).collect(),
            _ => BTreeSet::new(),
        }
    };
    let (processes, servers) = (names("processes"), names("servers"));
    // One name, one unit: `corral logs/start/stop NAME` and `.corral/logs/NAME.log`
    // would otherwise be shared by the two.
    if let Some(Value::Table(entries)) = root.get("processes").map(|e| &e.node.value) {
        for e in entries.iter().filter(|e| servers.contains(e.key.as_str())) {
            problems.push(Problem {
                line: e.key_pos.line,
                column: e.key_pos.column,
                key: format!("processes.{}", e.key),
                message: format!(
                    "process {:?} has the name of a server; names are shared by `corral \
                     logs/start/stop NAME` and the log file .corral/logs/NAME.log, so one \
                     of the two must be renamed",
                    e.key
                ),
            });
        }
    }
    let mut edges: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for process in &raw.processes {
        let out = edges.entry(process.name.as_str()).or_default();
        for dep in &process.depends_on {
            if processes.contains(dep.name.as_str()) {
                out.push(dep.name.as_str());
            } else if !servers.contains(dep.name.as_str()) {
                let list = |names: &BTreeSet<&str>| match names.is_empty() {
                    true => "none".to_owned(),
                    false => names.iter().copied().collect::<Vec<_>>().join(", "),
                };
                let near = crate::suggest::closest(
                    &dep.name,
                    &processes
                        .iter()
                        .chain(&servers)
                        .copied()
                        .collect::<Vec<_>>(),
                )
                .map(|n| format!("did you mean {n:?}? "))
                .unwrap_or_default();
                problems.push(Problem {
                    line: dep.pos.line,
                    column: dep.pos.column,
                    key: dep.key.clone(),
                    message: format!(
                        "depends on {:?}, which is neither a process nor a server; {near}\
                         processes: {}; servers: {}",
                        dep.name,
                        list(&processes),
                        list(&servers)
                    ),
                });
            }
        }
    }
    for cycle in cycles(&edges) {
        let first = cycle[0];
        let second = cycle.get(1).copied().unwrap_or(first);
        let raw_process = raw.processes.iter().find(|p| p.name == first);
        let dep = raw_process.and_then(|p| p.depends_on.iter().find(|d| d.name == second));
        let path: Vec<&str> = cycle.iter().copied().chain([first]).collect();
        if let Some(dep) = dep {
            problems.push(Problem {
                line: dep.pos.line,
                column: dep.pos.column,
                key: dep.key.clone(),
                message: format!(
                    "dependency cycle: {}; none of them could ever start; remove one of \
                     these depends_on entries",
                    path.join(" → ")
                ),
            });
        }
    }
}

/// Each elementary cycle found by a depth-first walk, once, starting at its smallest
/// name (walks go in name order, so the report is stable).
fn cycles<'a>(edges: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<Vec<&'a str>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    fn visit<'a>(
        node: &'a str,
        edges: &BTreeMap<&'a str, Vec<&'a str>>,
        marks: &mut BTreeMap<&'a str, Mark>,
        path: &mut Vec<&'a str>,
        found: &mut Vec<Vec<&'a str>>,
    ) {
        marks.insert(node, Mark::OnPath);
        path.push(node);
        let mut next: Vec<&str> = edges.get(node).cloned().unwrap_or_default();
        next.sort_unstable();
        for to in next {
            match marks.get(to).copied().unwrap_or(Mark::New) {
                Mark::New => visit(to, edges, marks, path, found),
                Mark::OnPath => {
                    let start = path.iter().position(|n| *n == to).expect("on the path");
                    let mut cycle = path[start..].to_vec();
                    // Start at the smallest name, keeping the direction.
                    let min = (0..cycle.len()).min_by_key(|&i| cycle[i]).unwrap_or(0);
                    cycle.rotate_left(min);
                    if !found.contains(&cycle) {
                        found.push(cycle);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks.insert(node, Mark::Done);
    }
    let mut marks = BTreeMap::new();
    let mut found = Vec::new();
    for &node in edges.keys() {
        if marks.get(node).copied().unwrap_or(Mark::New) == Mark::New {
            visit(node, edges, &mut marks, &mut Vec::new(), &mut found);
        }
    }
    found
}

impl Config {
    /// The processes in an order where each comes after every process it depends on;
    /// among those free to go, by name (so the order is stable). Servers a process
    /// depends on are not in it: they start first, and the supervisor waits for them.
    pub fn start_order(&self) -> Vec<&ProcessConfig> {
        // Kahn's algorithm over the process → process edges.
        let mut waiting: BTreeMap<&str, usize> = BTreeMap::new();
        let mut dependents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, p) in &self.processes {
            let deps: Vec<&str> = p
                .depends_on
                .iter()
                .map(String::as_str)
                .filter(|d| self.processes.contains_key(*d))
                .collect();
            waiting.insert(name, deps.len());
            for d in deps {
                dependents.entry(d).or_default().push(name);
            }
        }
        let mut free: BTreeSet<&str> = waiting
            .iter()
            .filter(|(_, n)| **n == 0)
            .map(|(name, _)| *name)
            .collect();
        let mut order = Vec::with_capacity(self.processes.len());
        while let Some(name) = free.pop_first() {
            waiting.remove(name);
            order.push(&self.processes[name]);
            for d in dependents.get(name).into_iter().flatten() {
                if let Some(n) = waiting.get_mut(d) {
                    *n -= 1;
                    if *n == 0 {
                        free.insert(d);
                    }
                }
            }
        }
        // A validated config has no cycle; were there one, its members go last by name
        // rather than vanish.
        order.extend(waiting.keys().map(|name| &self.processes[*name]));
        order
    }
}
