//! What the simulation expects a restart to find: the namespace after every acknowledged
//! metadata change, and per object the bytes acknowledged.

use std::collections::{BTreeMap, HashMap};
use weft_proto::msg::FileType;
use weft_proto::Fid;

/// A name as the MDS has it: what it is and its mode (sizes are the objects' business).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub fid: Fid,
    pub kind: FileType,
    pub mode: u32,
}

/// Path (without a leading slash) to node.
pub type Namespace = BTreeMap<String, Node>;

/// One object's bytes as acknowledged to a writer (after a power loss too: what the OST
/// had not committed comes back from the writers' replays).
#[derive(Debug, Clone, Default)]
pub struct ObjectModel {
    pub current: Vec<u8>,
    /// A write to it failed: it may hold part of that write, so its bytes are not checked.
    pub tainted: bool,
}

impl ObjectModel {
    pub fn write(&mut self, offset: usize, data: &[u8]) {
        if self.current.len() < offset + data.len() {
            self.current.resize(offset + data.len(), 0);
        }
        self.current[offset..offset + data.len()].copy_from_slice(data);
    }
}

#[derive(Debug, Default)]
pub struct Model {
    /// The namespace after each acknowledged metadata change, the first being the empty
    /// root.
    pub history: Vec<Namespace>,
    /// The entry of `history` that the last completed checkpoint holds.
    pub checkpointed: usize,
    pub objects: HashMap<Fid, ObjectModel>,
}

impl Model {
    pub fn new() -> Model {
        Model { history: vec![Namespace::new()], checkpointed: 0, objects: HashMap::new() }
    }

    pub fn now(&self) -> &Namespace {
        self.history.last().expect("the history starts with the empty root")
    }

    /// Records an acknowledged metadata change.
    pub fn acknowledge(&mut self, change: impl FnOnce(&mut Namespace)) {
        let mut next = self.now().clone();
        change(&mut next);
        self.history.push(next);
    }

    /// Paths of the directories (the root is "").
    pub fn dirs(&self) -> Vec<String> {
        std::iter::once(String::new())
            .chain(self.now().iter().filter(|(_, n)| n.kind == FileType::Directory).map(|(p, _)| p.clone()))
            .collect()
    }

    pub fn files(&self) -> Vec<(String, Node)> {
        self.now().iter().filter(|(_, n)| n.kind == FileType::Regular).map(|(p, n)| (p.clone(), *n)).collect()
    }
}

/// `name` under directory `dir` ("" is the root).
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}
