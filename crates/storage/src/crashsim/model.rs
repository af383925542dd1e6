//! The model disk a power-loss test replays a journal against: two
//! images of a directory tree, as written and as durable, and a
//! materialized copy of the durable one to recover from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::Op;

/// A name in the tree: a file (an index into the inodes) or a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// A file: its inode.
    File(usize),
    /// A directory.
    Dir,
}

#[derive(Default)]
struct Inode {
    written: Vec<u8>,
    durable: Vec<u8>,
}

/// Two images of a directory tree: the names and bytes as written, and
/// what a power cut would leave: bytes as of the file's last completed
/// fsync, names as of their directory's last completed fsync.
pub struct Disk {
    root: PathBuf,
    inodes: Vec<Inode>,
    written: BTreeMap<PathBuf, Node>,
    durable: BTreeMap<PathBuf, Node>,
}

impl Disk {
    /// A disk holding only `root`, an existing (durable) directory.
    pub fn new(root: &Path) -> Disk {
        let mut d = Disk {
            root: root.to_path_buf(),
            inodes: Vec::new(),
            written: BTreeMap::new(),
            durable: BTreeMap::new(),
        };
        d.written.insert(root.to_path_buf(), Node::Dir);
        d.durable.insert(root.to_path_buf(), Node::Dir);
        d
    }

    fn inode(&mut self, p: &Path) -> &mut Inode {
        match self.written.get(p) {
            Some(Node::File(i)) => &mut self.inodes[*i],
            other => panic!("{} is {other:?}, not a file", p.display()),
        }
    }

    /// Apply `op`; true if it is a sync point.
    pub fn apply(&mut self, op: &Op) -> bool {
        match op {
            Op::Create { path, truncate } => match self.written.get(path) {
                Some(Node::File(i)) => {
                    if *truncate {
                        self.inodes[*i].written.clear();
                    }
                }
                _ => {
                    self.inodes.push(Inode::default());
                    let i = self.inodes.len() - 1;
                    self.written.insert(path.clone(), Node::File(i));
                }
            },
            Op::Write { path, at, bytes } => {
                let f = &mut self.inode(path).written;
                let end = *at as usize + bytes.len();
                if f.len() < end {
                    f.resize(end, 0);
                }
                f[*at as usize..end].copy_from_slice(bytes);
            }
            Op::SetLen { path, len } => self.inode(path).written.resize(*len as usize, 0),
            Op::Sync { path } => {
                let f = self.inode(path);
                f.durable = f.written.clone();
                return true;
            }
            Op::Rename { from, to } => {
                let moved: Vec<(PathBuf, Node)> = self
                    .written
                    .range(from.clone()..)
                    .take_while(|(p, _)| p.starts_with(from))
                    .map(|(p, n)| (p.clone(), *n))
                    .collect();
                assert!(!moved.is_empty(), "rename of missing {}", from.display());
                for (p, n) in moved {
                    self.written.remove(&p);
                    let rest = p.strip_prefix(from).expect("under from");
                    let dest = if rest.as_os_str().is_empty() {
                        to.clone()
                    } else {
                        to.join(rest)
                    };
                    self.written.insert(dest, n);
                }
            }
            Op::Remove { path } => {
                self.written.remove(path);
            }
            Op::RemoveAll { path } => {
                self.written.retain(|p, _| !p.starts_with(path));
            }
            Op::MakeDir { path } => {
                self.written.entry(path.clone()).or_insert(Node::Dir);
            }
            Op::SyncDir { path } => {
                let child = |p: &Path| p.parent() == Some(path.as_path());
                self.durable.retain(|p, _| !child(p));
                for (p, n) in &self.written {
                    if child(p) {
                        self.durable.insert(p.clone(), *n);
                    }
                }
                return true;
            }
            Op::Mark(_) => {}
        }
        false
    }

    /// Write the durable image to `to`: every durable name whose
    /// directories are durable too, with its file's durable bytes.
    pub fn materialize(&self, to: &Path) {
        let _ = std::fs::remove_dir_all(to);
        std::fs::create_dir_all(to).unwrap();
        for (p, n) in &self.durable {
            let reachable = p
                .ancestors()
                .skip(1)
                .take_while(|a| a.starts_with(&self.root) && *a != self.root)
                .all(|a| self.durable.get(a) == Some(&Node::Dir));
            if !reachable || p == &self.root {
                continue;
            }
            let dest = to.join(p.strip_prefix(&self.root).expect("under root"));
            match n {
                Node::Dir => std::fs::create_dir_all(&dest).unwrap(),
                Node::File(i) => {
                    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
                    std::fs::write(&dest, &self.inodes[*i].durable).unwrap();
                }
            }
        }
    }
}
