//! Finding and classifying the smallest forbidden cycle in each strongly
//! connected component (SCC) of the dependency graph.
//!
//! Every cycle lies inside one SCC, so each non-trivial SCC is searched on
//! its own, class by class in Elle's priority order; the first class with
//! a cycle wins and its shortest cycle is reported:
//!
//! | class          | closing edge u→v | path v→…→u may use          |
//! |----------------|------------------|-----------------------------|
//! | G0             | ww               | ww                          |
//! | G1c            | wr               | ww, wr                      |
//! | G-single       | rw               | ww, wr                      |
//! | G2 / G2-item   | rw               | anything (serializable)     |
//! | G-nonadjacent  | rw               | anything, no two rw in a row (snapshot isolation) |
//!
//! The shortest cycle through a closing edge u→v is the edge plus a
//! breadth-first shortest path v→u; the shortest of a class is the minimum
//! over its closing edges. For G-nonadjacent the search runs over states
//! `(node, last edge was rw)`, starting at `(v, true)` (the closing edge is
//! rw) and ending at `(u, false)`, so no two anti-dependencies are adjacent
//! anywhere on the cycle, including around the closing edge.
//!
//! As in Elle, G0 and G1c are searched in the SCCs of the graph restricted
//! to ww (respectively ww and wr) edges: a closing edge inside such a
//! sub-SCC is certain to close a cycle of its class, so the first search
//! runs without a budget and these classes are never missed.
//!
//! Limits: at most [`MAX_STARTS`] closing edges and [`WORK_BUDGET`] edge
//! visits per class and SCC (after the first cycle, for G0 and G1c), and
//! searches are cut at the best length found so far. Past
//! [`TOTAL_BUDGET`] edge visits overall, each further class search gets
//! [`SMALL_BUDGET`]. When G-single and the last class run out of budget
//! without a cycle, serializability still reports one: an unbounded search
//! over all edges, classified by its edges. Under snapshot isolation the
//! SCC is then left unreported.

use crate::graph::{bit, EdgeIx, Graph, RW, UNSEEN};
use crate::history::History;
use crate::report::{Anomaly, AnomalyKind, EdgeKind, Level, Sink, Step};
use crate::versions::Node;

/// Closing edges tried per class and SCC.
pub(crate) const MAX_STARTS: usize = 4096;
/// Edge visits per class and SCC.
pub(crate) const WORK_BUDGET: u64 = 4_000_000;
/// Edge visits over all SCCs after which each class search gets only
/// [`SMALL_BUDGET`], so a history with thousands of large SCCs finishes.
pub(crate) const TOTAL_BUDGET: u64 = 200_000_000;
/// See [`TOTAL_BUDGET`].
pub(crate) const SMALL_BUDGET: u64 = 20_000;

const WW: u8 = bit(EdgeKind::Ww);
const WR: u8 = bit(EdgeKind::Wr);
const ALL: u8 = WW | WR | RW;

/// One search class. See the module docs.
#[derive(Debug, Clone, Copy)]
struct Class {
    closing: u8,
    path: u8,
    nonadjacent: bool,
    /// Every closing edge inside the searched component closes a cycle of
    /// this class (so the first search needs no budget).
    certain: bool,
}

const G0: Class = Class {
    closing: WW,
    path: WW,
    nonadjacent: false,
    certain: true,
};
const G1C: Class = Class {
    closing: WR,
    path: WW | WR,
    nonadjacent: false,
    certain: true,
};
const G_SINGLE: Class = Class {
    closing: RW,
    path: WW | WR,
    nonadjacent: false,
    certain: false,
};
const G2: Class = Class {
    closing: RW,
    path: ALL,
    nonadjacent: false,
    certain: false,
};
const G_NONADJACENT: Class = Class {
    closing: RW,
    path: ALL,
    nonadjacent: true,
    certain: false,
};
/// Any cycle at all, through any edge (the serializable fallback).
const ANY: Class = Class {
    closing: ALL,
    path: ALL,
    nonadjacent: false,
    certain: true,
};

/// One edge of a found cycle, as graph coordinates.
#[derive(Debug, Clone, Copy)]
struct Hop {
    from: Node,
    edge: EdgeIx,
    kind: EdgeKind,
}

/// The work budget ran out.
struct OverBudget;

/// Finds the forbidden cycles of `graph` at `level`, reports one anomaly
/// per SCC that has any to `sink`, and returns the number of non-trivial
/// SCCs.
pub(crate) fn report_cycles(
    graph: &Graph,
    history: &History,
    level: Level,
    sink: &mut Sink,
) -> usize {
    let (comp, sccs) = graph.components();
    if sccs.is_empty() {
        return 0;
    }
    // scc_of[node]: index into `sccs`, or UNSEEN.
    let mut scc_of = vec![UNSEEN; graph.nodes()];
    for (i, members) in sccs.iter().enumerate() {
        for &m in members {
            scc_of[m as usize] = i as u32;
        }
    }
    drop(comp);
    let mut finder = CycleFinder::new(graph);
    let mut best: Vec<Option<Vec<Hop>>> = vec![None; sccs.len()];
    // G0, then G1c, each in the SCCs of its restricted graph.
    for class in [G0, G1C] {
        // Only SCCs without a cycle of an earlier class take part.
        let searching: Vec<bool> = best.iter().map(Option::is_none).collect();
        let in_search = |n: Node| {
            let i = scc_of[n as usize];
            i != UNSEEN && searching[i as usize]
        };
        let roots = sccs.iter().zip(&searching).filter(|(_, &s)| s);
        let roots: Vec<Node> = roots.flat_map(|(m, _)| m.iter().copied()).collect();
        let (sub_comp, subs) = graph.tarjan(roots, |e, w| {
            graph.mask(e) & class.path != 0 && in_search(w)
        });
        for members in &subs {
            let i = scc_of[members[0] as usize] as usize;
            let shortest_so_far = best[i].as_ref().map_or(usize::MAX, Vec::len);
            if let Some(cycle) = finder.shortest(&sub_comp, members, class, shortest_so_far) {
                best[i] = Some(cycle);
            }
        }
    }
    for (i, members) in sccs.iter().enumerate() {
        let cycle = best[i]
            .take()
            .or_else(|| finder.search_rw(&scc_of, members, level));
        if let Some(a) = cycle.and_then(|c| finder.classify(history, &c, level)) {
            sink.report(a.kind, || a);
        }
    }
    sccs.len()
}

/// Reusable breadth-first search state over `(node, flag)` states,
/// `state = node * 2 + flag`, with generation stamps so nothing is cleared
/// between searches.
struct CycleFinder<'g> {
    g: &'g Graph,
    stamp: Vec<u32>,
    generation: u32,
    parent: Vec<u32>,
    parent_edge: Vec<EdgeIx>,
    parent_kind: Vec<u8>,
    queue: Vec<u32>,
    /// Edge visits over all searches.
    total_work: u64,
}

impl<'g> CycleFinder<'g> {
    fn new(g: &'g Graph) -> CycleFinder<'g> {
        let states = g.nodes() * 2;
        CycleFinder {
            g,
            stamp: vec![0; states],
            generation: 0,
            parent: vec![0; states],
            parent_edge: vec![0; states],
            parent_kind: vec![0; states],
            queue: Vec::new(),
            total_work: 0,
        }
    }

    fn budget(&self) -> u64 {
        if self.total_work > TOTAL_BUDGET {
            SMALL_BUDGET
        } else {
            WORK_BUDGET
        }
    }

    /// The cycle classes with anti-dependencies, for an SCC without G0 or
    /// G1c: G-single, then G2 (serializable) or G-nonadjacent (snapshot
    /// isolation), then the serializable fallback.
    fn search_rw(&mut self, scc_of: &[u32], members: &[Node], level: Level) -> Option<Vec<Hop>> {
        let last = match level {
            Level::Serializable => G2,
            Level::SnapshotIsolation => G_NONADJACENT,
        };
        for class in [G_SINGLE, last] {
            if let Some(cycle) = self.shortest(scc_of, members, class, usize::MAX) {
                return Some(cycle);
            }
        }
        match level {
            Level::Serializable => self.shortest(scc_of, members, ANY, usize::MAX),
            Level::SnapshotIsolation => None,
        }
    }

    /// Shortest cycle of `class` shorter than `shorter_than`, within the
    /// component (per `comp`) of `members`. `None` if there is none, or
    /// none was found within budget.
    fn shortest(
        &mut self,
        comp: &[u32],
        members: &[Node],
        class: Class,
        shorter_than: usize,
    ) -> Option<Vec<Hop>> {
        let c = comp[members[0] as usize];
        let budget = self.budget();
        let mut best: Option<Vec<Hop>> = None;
        let mut starts = 0;
        let mut work = 0;
        'starts: for &u in members {
            for e in self.g.edges(u) {
                let v = self.g.target(e);
                let closing = self.g.mask(e) & class.closing;
                if closing == 0 || comp[v as usize] != c {
                    continue;
                }
                if starts == MAX_STARTS {
                    break 'starts;
                }
                starts += 1;
                // Lowest kind as the closing witness (item before predicate).
                let kind = EdgeKind::from_index(closing.trailing_zeros());
                // A path of `len` edges makes a cycle of `len + 1`.
                let limit = best.as_ref().map_or(shorter_than, Vec::len);
                if limit <= 2 {
                    break 'starts;
                }
                let max_len = limit.saturating_sub(2);
                let unbounded = class.certain && best.is_none() && shorter_than == usize::MAX;
                let budget_left = if unbounded {
                    u64::MAX
                } else {
                    budget.saturating_sub(work)
                };
                let found = self.bfs(comp, c, v, u, class, max_len, budget_left, &mut work);
                match found {
                    Err(OverBudget) => break 'starts,
                    Ok(Some(path)) => {
                        let mut cycle = Vec::with_capacity(path.len() + 1);
                        cycle.push(Hop {
                            from: u,
                            edge: e,
                            kind,
                        });
                        cycle.extend(path);
                        best = Some(cycle);
                    }
                    Ok(None) => {}
                }
            }
        }
        self.total_work += work;
        best
    }

    /// Breadth-first shortest path `start → goal` of at most `max_len`
    /// edges inside component `c` of `comp`, over `class.path` edges.
    /// Counts edge visits into `work`; fails once they pass `budget`.
    #[allow(clippy::too_many_arguments)]
    fn bfs(
        &mut self,
        comp: &[u32],
        c: u32,
        start: Node,
        goal: Node,
        class: Class,
        max_len: usize,
        budget: u64,
        work: &mut u64,
    ) -> Result<Option<Vec<Hop>>, OverBudget> {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.fill(0);
            self.generation = 1;
        }
        let gen = self.generation;
        let start_state = start * 2 + u32::from(class.nonadjacent);
        let goal_state = goal * 2;
        self.queue.clear();
        self.queue.push(start_state);
        self.stamp[start_state as usize] = gen;
        let mut spent = 0u64;
        let mut head = 0;
        let mut depth = 0;
        while head < self.queue.len() && depth < max_len {
            depth += 1;
            let level_end = self.queue.len();
            while head < level_end {
                let s = self.queue[head];
                head += 1;
                let (x, last_rw) = (s / 2, s & 1 == 1);
                for e in self.g.edges(x) {
                    spent += 1;
                    if spent > budget {
                        *work += spent;
                        return Err(OverBudget);
                    }
                    let y = self.g.target(e);
                    if comp[y as usize] != c {
                        continue;
                    }
                    let mut kinds = self.g.mask(e) & class.path;
                    if class.nonadjacent && last_rw {
                        kinds &= !RW;
                    }
                    if kinds == 0 {
                        continue;
                    }
                    // Lowest kind first: ww, wr, then rw (item before
                    // predicate), so a state is reached by its least
                    // constraining edge.
                    let k = kinds.trailing_zeros();
                    let rw = class.nonadjacent && (1u8 << k) & RW != 0;
                    self.visit(gen, s, y * 2 + u32::from(rw), e, k);
                    // Under the adjacency rule a non-rw way into `y` and an
                    // rw way lead to different states; take both.
                    if class.nonadjacent && !rw && kinds & RW != 0 {
                        self.visit(gen, s, y * 2 + 1, e, (kinds & RW).trailing_zeros());
                    }
                    if self.stamp[goal_state as usize] == gen {
                        *work += spent;
                        return Ok(Some(self.path(start_state, goal_state)));
                    }
                }
            }
        }
        *work += spent;
        Ok(None)
    }

    /// Enqueues state `next`, reached from `s` by kind `k` of edge `e`,
    /// unless already seen in this search.
    fn visit(&mut self, gen: u32, s: u32, next: u32, e: EdgeIx, k: u32) {
        if self.stamp[next as usize] != gen {
            self.stamp[next as usize] = gen;
            self.parent[next as usize] = s;
            self.parent_edge[next as usize] = e;
            self.parent_kind[next as usize] = k as u8;
            self.queue.push(next);
        }
    }

    /// Walks parents back from `goal` to `start`.
    fn path(&self, start: u32, goal: u32) -> Vec<Hop> {
        let mut hops = Vec::new();
        let mut s = goal;
        while s != start {
            let p = self.parent[s as usize];
            hops.push(Hop {
                from: p / 2,
                edge: self.parent_edge[s as usize],
                kind: EdgeKind::from_index(u32::from(self.parent_kind[s as usize])),
            });
            s = p;
        }
        hops.reverse();
        hops
    }

    /// Names a found cycle by its edges; `None` if `level` allows it.
    fn classify(&self, history: &History, cycle: &[Hop], level: Level) -> Option<Anomaly> {
        let rw: Vec<usize> = (0..cycle.len())
            .filter(|&i| cycle[i].kind.is_rw())
            .collect();
        let kind = match rw.len() {
            0 if cycle.iter().all(|h| h.kind == EdgeKind::Ww) => AnomalyKind::G0,
            0 => AnomalyKind::G1c,
            1 => AnomalyKind::GSingle,
            _ => match level {
                Level::Serializable => {
                    if cycle.iter().any(|h| h.kind == EdgeKind::RwPredicate) {
                        AnomalyKind::G2
                    } else {
                        AnomalyKind::G2Item
                    }
                }
                Level::SnapshotIsolation => {
                    let n = cycle.len();
                    if rw.iter().any(|&i| cycle[(i + 1) % n].kind.is_rw()) {
                        return None;
                    }
                    AnomalyKind::GNonadjacent
                }
            },
        };
        let id = |n: Node| history.txns[n as usize].id;
        let steps = cycle
            .iter()
            .map(|h| Step {
                from: id(h.from),
                to: id(self.g.target(h.edge)),
                edge: h.kind,
                key: self.g.witness(h.edge, h.kind),
            })
            .collect();
        Some(Anomaly::cycle(kind, steps))
    }
}
