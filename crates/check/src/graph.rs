//! The dependency graph in compressed sparse row form, and Tarjan's
//! strongly connected components.
//!
//! Edges are deduplicated per `(from, to)`: one entry holds a bit mask of
//! the [`EdgeKind`]s between the two transactions and one witness key per
//! kind present. Node `i`'s edges are `targets[offsets[i]..offsets[i+1]]`
//! (with `masks` and `witness_start` parallel to `targets`); the witness of
//! kind `k` on edge `j` is `witnesses[witness_start[j] + popcount(mask_j &
//! ((1 << k) - 1))]`.

use crate::deps::RawEdge;
use crate::history::Key;
use crate::report::EdgeKind;
use crate::versions::Node;

/// Bit of `kind` in an edge's kind mask.
pub(crate) const fn bit(kind: EdgeKind) -> u8 {
    1 << kind as u8
}

/// Mask of both anti-dependency kinds.
pub(crate) const RW: u8 = bit(EdgeKind::RwItem) | bit(EdgeKind::RwPredicate);

/// Component id of a node [`Graph::tarjan`] did not visit.
pub(crate) const UNSEEN: u32 = u32::MAX;

/// Index of an edge in the CSR arrays.
pub(crate) type EdgeIx = usize;

/// The deduplicated dependency graph. See the module docs.
#[derive(Debug)]
pub(crate) struct Graph {
    offsets: Vec<usize>,
    targets: Vec<Node>,
    masks: Vec<u8>,
    witness_start: Vec<usize>,
    witnesses: Vec<Key>,
}

impl Graph {
    /// Builds the graph of `n` nodes: sorts `raw` by `(source, target,
    /// kind)` and merges duplicates (any one witness per kind is kept).
    /// `raw` is consumed to free its memory early.
    pub(crate) fn build(n: usize, mut raw: Vec<RawEdge>) -> Graph {
        raw.sort_unstable_by_key(|e| (u64::from(e.from) << 32) | u64::from(e.target_kind()));
        let mut g = Graph {
            offsets: Vec::with_capacity(n + 1),
            targets: Vec::with_capacity(raw.len()),
            masks: Vec::with_capacity(raw.len()),
            witness_start: Vec::with_capacity(raw.len()),
            witnesses: Vec::with_capacity(raw.len()),
        };
        g.offsets.push(0);
        for group in raw.chunk_by(|a, b| a.from == b.from) {
            let from = group[0].from as usize;
            while g.offsets.len() <= from {
                g.offsets.push(g.targets.len());
            }
            let first_of_node = g.targets.len();
            let mut last_tk = u32::MAX;
            for e in group.iter() {
                if e.target_kind() == last_tk {
                    continue;
                }
                last_tk = e.target_kind();
                let to = e.target();
                if g.targets.len() > first_of_node && g.targets.last() == Some(&to) {
                    // Kinds arrive in ascending order, so witnesses stay in
                    // bit order.
                    *g.masks.last_mut().expect("targets and masks are parallel") |= bit(e.kind());
                } else {
                    g.targets.push(to);
                    g.masks.push(bit(e.kind()));
                    g.witness_start.push(g.witnesses.len());
                }
                g.witnesses.push(e.key);
            }
        }
        while g.offsets.len() <= n {
            g.offsets.push(g.targets.len());
        }
        g
    }

    /// Number of nodes.
    pub(crate) fn nodes(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Number of deduplicated `(from, to)` edges.
    #[cfg(test)]
    pub(crate) fn edge_count(&self) -> usize {
        self.targets.len()
    }

    /// The edge indices leaving `node`.
    #[inline]
    pub(crate) fn edges(&self, node: Node) -> std::ops::Range<EdgeIx> {
        self.offsets[node as usize]..self.offsets[node as usize + 1]
    }

    #[inline]
    pub(crate) fn target(&self, e: EdgeIx) -> Node {
        self.targets[e]
    }

    #[inline]
    pub(crate) fn mask(&self, e: EdgeIx) -> u8 {
        self.masks[e]
    }

    /// The witness key of `kind` on edge `e`; `kind` must be in its mask.
    pub(crate) fn witness(&self, e: EdgeIx, kind: EdgeKind) -> Key {
        let below = self.masks[e] & (bit(kind) - 1);
        self.witnesses[self.witness_start[e] + below.count_ones() as usize]
    }

    /// Tarjan's algorithm without recursion (histories have millions of
    /// transactions; the call stack would overflow), over the nodes
    /// reachable from `roots` through edges `keep(edge, target)` accepts.
    /// Returns each node's component id ([`UNSEEN`] for nodes not visited)
    /// and the members of every component with at least two nodes. Self
    /// loops are never built, so those are exactly the components that
    /// contain a cycle.
    pub(crate) fn tarjan(
        &self,
        roots: impl IntoIterator<Item = Node>,
        keep: impl Fn(EdgeIx, Node) -> bool,
    ) -> (Vec<u32>, Vec<Vec<Node>>) {
        let n = self.nodes();
        let mut index = vec![UNSEEN; n];
        let mut low = vec![0u32; n];
        let mut on_stack = vec![false; n];
        let mut comp = vec![UNSEEN; n];
        let mut stack: Vec<Node> = Vec::new();
        // (node, next edge to look at)
        let mut calls: Vec<(Node, EdgeIx)> = Vec::new();
        let mut next_index = 0u32;
        let mut next_comp = 0u32;
        let mut big = Vec::new();

        for root in roots {
            if index[root as usize] != UNSEEN {
                continue;
            }
            if self.edges(root).is_empty() {
                // Fast path: most aborted and many read-only nodes.
                index[root as usize] = next_index;
                next_index += 1;
                comp[root as usize] = next_comp;
                next_comp += 1;
                continue;
            }
            index[root as usize] = next_index;
            low[root as usize] = next_index;
            next_index += 1;
            stack.push(root);
            on_stack[root as usize] = true;
            calls.push((root, self.offsets[root as usize]));
            while let Some(&mut (v, ref mut next)) = calls.last_mut() {
                let end = self.offsets[v as usize + 1];
                if *next < end {
                    let e = *next;
                    *next += 1;
                    let w = self.targets[e];
                    if !keep(e, w) {
                        continue;
                    }
                    if index[w as usize] == UNSEEN {
                        index[w as usize] = next_index;
                        low[w as usize] = next_index;
                        next_index += 1;
                        stack.push(w);
                        on_stack[w as usize] = true;
                        calls.push((w, self.offsets[w as usize]));
                    } else if on_stack[w as usize] {
                        low[v as usize] = low[v as usize].min(index[w as usize]);
                    }
                    continue;
                }
                calls.pop();
                if let Some(&(parent, _)) = calls.last() {
                    low[parent as usize] = low[parent as usize].min(low[v as usize]);
                }
                if low[v as usize] == index[v as usize] {
                    let mut members = Vec::new();
                    loop {
                        let w = stack.pop().expect("v is on the stack");
                        on_stack[w as usize] = false;
                        comp[w as usize] = next_comp;
                        members.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if members.len() > 1 {
                        members.sort_unstable();
                        big.push(members);
                    }
                    next_comp += 1;
                }
            }
        }
        (comp, big)
    }

    /// [`Graph::tarjan`] over every node and edge.
    pub(crate) fn components(&self) -> (Vec<u32>, Vec<Vec<Node>>) {
        self.tarjan(0..self.nodes() as Node, |_, _| true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(from: Node, to: Node, kind: EdgeKind, key: Key) -> RawEdge {
        RawEdge::new(from, to, kind, key)
    }

    #[test]
    fn merges_parallel_edges_keeping_first_witness_per_kind() {
        let g = Graph::build(
            3,
            vec![
                raw(0, 1, EdgeKind::RwItem, 7),
                raw(0, 1, EdgeKind::Ww, 5),
                raw(0, 1, EdgeKind::Ww, 6),
                raw(0, 2, EdgeKind::Wr, 9),
                raw(2, 0, EdgeKind::RwPredicate, 1),
            ],
        );
        assert_eq!(g.edge_count(), 3);
        let e = g.edges(0).start;
        assert_eq!(g.target(e), 1);
        assert_eq!(g.mask(e), bit(EdgeKind::Ww) | bit(EdgeKind::RwItem));
        assert_eq!(g.witness(e, EdgeKind::Ww), 5);
        assert_eq!(g.witness(e, EdgeKind::RwItem), 7);
        assert_eq!(g.witness(g.edges(2).start, EdgeKind::RwPredicate), 1);
    }

    #[test]
    fn tarjan_finds_components_iteratively_on_a_long_chain() {
        // A 200k-node cycle would overflow a recursive Tarjan's stack.
        let n = 200_000u32;
        let mut edges: Vec<_> = (0..n - 1).map(|i| raw(i, i + 1, EdgeKind::Ww, 0)).collect();
        edges.push(raw(n - 1, 0, EdgeKind::Ww, 0));
        edges.push(raw(5, 3, EdgeKind::Wr, 0));
        let g = Graph::build(n as usize + 2, edges);
        let (comp, big) = g.components();
        assert_eq!(big.len(), 1);
        assert_eq!(big[0].len(), n as usize);
        assert_ne!(comp[n as usize], comp[n as usize + 1]);
    }

    #[test]
    fn tarjan_separates_components() {
        let g = Graph::build(
            5,
            vec![
                raw(0, 1, EdgeKind::Ww, 0),
                raw(1, 0, EdgeKind::Ww, 0),
                raw(1, 2, EdgeKind::Wr, 0),
                raw(2, 3, EdgeKind::Wr, 0),
                raw(3, 2, EdgeKind::RwItem, 0),
                raw(3, 4, EdgeKind::Wr, 0),
            ],
        );
        let (comp, mut big) = g.components();
        big.sort();
        assert_eq!(big, vec![vec![0, 1], vec![2, 3]]);
        assert_ne!(comp[4], comp[2]);
    }

    #[test]
    fn tarjan_respects_the_edge_filter() {
        let g = Graph::build(
            3,
            vec![
                raw(0, 1, EdgeKind::Ww, 0),
                raw(1, 0, EdgeKind::RwItem, 0),
                raw(1, 2, EdgeKind::Ww, 0),
                raw(2, 1, EdgeKind::Ww, 0),
            ],
        );
        let (_, big) = g.components();
        assert_eq!(big, vec![vec![0, 1, 2]]);
        let (comp, big) = g.tarjan([0, 1], |e, _| g.mask(e) & bit(EdgeKind::Ww) != 0);
        assert_eq!(big, vec![vec![1, 2]]);
        assert_ne!(comp[0], comp[1]);
    }
}
