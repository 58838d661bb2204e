//! `cargo xtask deps`: the workspace's import graph, checked against the
//! layering ARCHITECTURE.md states.
//!
//! Reads `cargo metadata` (no network: `--no-deps --offline`) and keeps
//! the edges between workspace packages, of every kind (normal, build and
//! dev: a test that imports the policy type couples a crate to it as much
//! as its library would). Fails when:
//!
//! - a workspace package has no layer here (a new crate must be placed);
//! - an edge points to a higher layer, or sideways within a layer without
//!   being one of the few named exceptions;
//! - the graph has a cycle (cargo refuses cycles of normal dependencies,
//!   not those closed by a dev-dependency).
//!
//! It prints the graph, one package per line with its layer and its
//! workspace dependencies.

use std::collections::BTreeMap;
use std::process::Command;

/// Where a package sits. A package may depend on packages of lower layers;
/// sideways only through [`SIDEWAYS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    /// The error-code table every layer maps to.
    Base,
    /// rootfs, fileguard, netguard, shellexec, fetch, protect: they enforce, take
    /// plain values, and know nothing of the policy file or the facade.
    Mechanism,
    /// The policy file: pure data, which produces the mechanisms'
    /// configuration.
    Policy,
    /// The facade, the only crate that composes policy and mechanisms.
    Facade,
    /// What users run or link: the C ABI, the CLI, the MCP server, the
    /// Node addon.
    Frontend,
    /// The project's own automation.
    Tool,
}

const LAYERS: &[(&str, Layer)] = &[
    ("sandgate-codes", Layer::Base),
    ("sandgate-rootfs", Layer::Mechanism),
    ("sandgate-fileguard", Layer::Mechanism),
    ("sandgate-netguard", Layer::Mechanism),
    ("sandgate-shellexec", Layer::Mechanism),
    ("sandgate-fetch", Layer::Mechanism),
    ("sandgate-proxy", Layer::Mechanism),
    ("sandgate-resolve", Layer::Mechanism),
    ("sandgate-protect", Layer::Mechanism),
    ("sandgate-policy", Layer::Policy),
    ("sandgate", Layer::Facade),
    ("sandgate-ffi", Layer::Frontend),
    ("sandgate-cli", Layer::Frontend),
    ("sandgate-mcp", Layer::Frontend),
    ("sandgate-node", Layer::Frontend),
    ("xtask", Layer::Tool),
];

/// Edges within one layer that the layering admits: fetch and the shell's
/// egress proxy enforce netguard's rules and share one resolver, protect enforces fileguard's
/// patterns through rootfs, the executor checks its own file writes
/// against the file size limit with rootfs's one check, and the CLI serves
/// MCP.
const SIDEWAYS: &[(&str, &str)] = &[
    ("sandgate-fetch", "sandgate-netguard"),
    ("sandgate-proxy", "sandgate-netguard"),
    ("sandgate-fetch", "sandgate-resolve"),
    ("sandgate-proxy", "sandgate-resolve"),
    ("sandgate-protect", "sandgate-rootfs"),
    ("sandgate-protect", "sandgate-fileguard"),
    ("sandgate-shellexec", "sandgate-rootfs"),
    ("sandgate-cli", "sandgate-mcp"),
];

/// The policy crate is pure: of the mechanisms, it may use only the pure
/// rules whose configuration it produces.
const POLICY_MAY_USE: &[&str] = &["sandgate-netguard"];

/// Package name to its workspace dependencies (with the kinds that bring
/// each in).
type Graph = BTreeMap<String, BTreeMap<String, Vec<String>>>;

pub fn run(args: &[String]) -> Result<(), String> {
    if let Some(extra) = args.first() {
        return Err(format!("deps takes no argument, not `{extra}`"));
    }
    let graph = workspace_graph()?;
    print!("{}", render(&graph));
    let problems = check(&graph);
    if problems.is_empty() {
        eprintln!(
            "deps: {} packages, no forbidden edge, no cycle",
            graph.len()
        );
        Ok(())
    } else {
        Err(format!(
            "the import graph breaks the layering:\n  {}",
            problems.join("\n  ")
        ))
    }
}

fn workspace_graph() -> Result<Graph, String> {
    let out = Command::new(crate::cargo())
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(crate::workspace_root())
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("cargo metadata printed something that is not JSON: {e}"))?;
    graph_of(&meta)
}

/// The edges between workspace packages in `cargo metadata` output.
fn graph_of(meta: &serde_json::Value) -> Result<Graph, String> {
    let packages = meta["packages"]
        .as_array()
        .ok_or("cargo metadata has no `packages` list")?;
    let names: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut graph = Graph::new();
    for package in packages {
        let name = package["name"].as_str().ok_or("a package without a name")?;
        let deps = graph.entry(name.to_owned()).or_default();
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let Some(dep_name) = dep["name"].as_str() else {
                continue;
            };
            if !names.contains(&dep_name) {
                continue;
            }
            let kind = dep["kind"].as_str().unwrap_or("normal").to_owned();
            let kinds = deps.entry(dep_name.to_owned()).or_default();
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
    }
    Ok(graph)
}

fn layer_of(name: &str) -> Option<Layer> {
    LAYERS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

/// Every breach of the layering in `graph`, in words.
fn check(graph: &Graph) -> Vec<String> {
    let mut problems = Vec::new();
    for (from, deps) in graph {
        let Some(from_layer) = layer_of(from) else {
            problems.push(format!(
                "{from} has no layer: place it in LAYERS (xtask/src/deps.rs) and in \
                 ARCHITECTURE.md"
            ));
            continue;
        };
        for (to, kinds) in deps {
            let Some(to_layer) = layer_of(to) else {
                continue; // reported as its own package
            };
            let allowed = match to_layer.cmp(&from_layer) {
                std::cmp::Ordering::Less => {
                    !(from_layer == Layer::Policy
                        && to_layer == Layer::Mechanism
                        && !POLICY_MAY_USE.contains(&to.as_str()))
                }
                std::cmp::Ordering::Equal => SIDEWAYS.contains(&(from.as_str(), to.as_str())),
                std::cmp::Ordering::Greater => false,
            };
            if !allowed {
                problems.push(format!(
                    "{from} ({from_layer:?}) depends on {to} ({to_layer:?}) [{}]",
                    kinds.join(", ")
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(graph) {
        problems.push(format!("a cycle: {}", cycle.join(" -> ")));
    }
    problems
}

/// A cycle in `graph`, as the packages along it (first repeated last).
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<'g>(
        graph: &'g Graph,
        node: &'g str,
        marks: &mut BTreeMap<&'g str, Mark>,
        path: &mut Vec<&'g str>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = path.iter().position(|n| *n == node).unwrap_or(0);
                let mut cycle: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
                cycle.push(node.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node, Mark::Open);
        path.push(node);
        for dep in graph.get(node).into_iter().flat_map(|d| d.keys()) {
            if let Some(cycle) = visit(graph, dep, marks, path) {
                return Some(cycle);
            }
        }
        path.pop();
        marks.insert(node, Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|node| visit(graph, node, &mut marks, &mut Vec::new()))
}

/// The graph, one package per line, lowest layer first.
fn render(graph: &Graph) -> String {
    let mut nodes: Vec<(&String, Option<Layer>)> = graph.keys().map(|n| (n, layer_of(n))).collect();
    nodes.sort_by_key(|(n, l)| (*l, *n));
    let mut out = String::new();
    for (name, layer) in nodes {
        let layer = layer.map_or("?".to_owned(), |l| format!("{l:?}").to_lowercase());
        let deps: Vec<String> = graph[name]
            .iter()
            .map(|(to, kinds)| {
                if kinds.iter().all(|k| k == "dev") {
                    format!("{to} (dev)")
                } else {
                    to.clone()
                }
            })
            .collect();
        let deps = if deps.is_empty() {
            "-".to_owned()
        } else {
            deps.join(", ")
        };
        out.push_str(&format!("{name:<20} {layer:<10} -> {deps}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &str, &str)]) -> Graph {
        let mut g = Graph::new();
        for (name, _) in LAYERS {
            g.entry((*name).to_owned()).or_default();
        }
        for (from, to, kind) in edges {
            g.entry((*from).to_owned())
                .or_default()
                .entry((*to).to_owned())
                .or_default()
                .push((*kind).to_owned());
        }
        g
    }

    #[test]
    fn the_workspace_keeps_its_layering() {
        let g = workspace_graph().unwrap();
        assert_eq!(check(&g), Vec::<String>::new());
        // The crates the layering is about are all there.
        for (name, _) in LAYERS {
            assert!(g.contains_key(*name), "{name}");
        }
    }

    #[test]
    fn a_mechanism_depending_on_policy_is_refused() {
        for kind in ["normal", "dev", "build"] {
            let g = graph(&[("sandgate-fetch", "sandgate-policy", kind)]);
            let problems = check(&g);
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(problems[0].contains("sandgate-fetch"), "{problems:?}");
        }
        let g = graph(&[("sandgate-rootfs", "sandgate", "dev")]);
        assert_eq!(check(&g).len(), 1);
    }

    #[test]
    fn sideways_edges_need_a_name() {
        assert!(check(&graph(&[("sandgate-fetch", "sandgate-netguard", "normal")])).is_empty());
        assert_eq!(
            check(&graph(&[("sandgate-fetch", "sandgate-rootfs", "normal")])).len(),
            1
        );
        assert_eq!(
            check(&graph(&[("sandgate-policy", "sandgate-rootfs", "normal")])).len(),
            1
        );
        assert!(check(&graph(&[(
            "sandgate-policy",
            "sandgate-netguard",
            "normal"
        )]))
        .is_empty());
    }

    #[test]
    fn a_cycle_is_refused() {
        let g = graph(&[
            ("sandgate-fetch", "sandgate-netguard", "normal"),
            ("sandgate-netguard", "sandgate-fetch", "dev"),
        ]);
        let problems = check(&g);
        assert!(
            problems.iter().any(|p| p.starts_with("a cycle")),
            "{problems:?}"
        );
        assert_eq!(
            find_cycle(&g).unwrap(),
            ["sandgate-fetch", "sandgate-netguard", "sandgate-fetch"]
        );
        assert_eq!(find_cycle(&graph(&[])), None);
    }

    #[test]
    fn an_unplaced_package_is_refused() {
        let mut g = graph(&[]);
        g.insert("sandgate-new".to_owned(), BTreeMap::new());
        let problems = check(&g);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("sandgate-new has no layer"));
    }
}
