//! The changes of the DNE simulation's workload: which the seed picks among those the
//! names allow, the request of each, and what it does to the names.

use super::cluster::MDTS;
use super::{Change, Effect, Sim};
use crate::model::join;
use weft_proto::dirstripe::{DirHash, DirStripeSpec};
use weft_proto::msg::{mdt, FileType};
use weft_proto::{ErrorCode, Fid};

impl Sim {
    pub(super) fn fid(&self, path: &str) -> Fid {
        if path.is_empty() {
            Fid::ROOT
        } else {
            self.names[path].fid.expect("an acknowledged name's FID is known")
        }
    }

    /// The directory that holds `name` in `dir`: `dir`, or the stripe of a striped one
    /// that the name's hash picks (as the client routes it).
    fn holder(&self, dir: &str, name: &str) -> Fid {
        let fid = self.fid(dir);
        match dir.is_empty() {
            false if self.names[dir].striped => match self.stripes.get(&self.names[dir].id) {
                Some(stripes) => stripes.stripe_for(name.as_bytes()),
                None => fid,
            },
            _ => fid,
        }
    }

    fn new_name(&mut self, prefix: &str) -> String {
        self.made += 1;
        format!("{prefix}{}", self.made)
    }

    /// Directories (the root too).
    fn dirs(&self) -> Vec<String> {
        let dirs = self.names.iter().filter(|(_, e)| e.kind == FileType::Directory);
        std::iter::once(String::new()).chain(dirs.map(|(p, _)| p.clone())).collect()
    }

    fn files(&self) -> Vec<String> {
        self.names.iter().filter(|(_, e)| e.kind == FileType::Regular).map(|(p, _)| p.clone()).collect()
    }

    /// The removal of `path`'s name (`rmdir`: a directory's), sent to the MDT that holds
    /// the name; `refused`: what the MDT must answer instead.
    fn removal(&self, path: String, rmdir: bool, refused: Option<ErrorCode>) -> Change {
        let (dir, name) = split(&path);
        let holder = self.holder(dir, name);
        let name = name.as_bytes().to_vec();
        let (verb, req): (_, weft_proto::msg::MdtRequest) = match rmdir {
            true => ("rmdir", mdt::Rmdir { parent: holder, name }.into()),
            false => ("rm", mdt::Unlink { parent: holder, name }.into()),
        };
        Change {
            what: format!("{verb} /{path} ({})", self.fid(&path)),
            mdt: holder.mdt_index(),
            req,
            effect: Effect::Remove { path },
            refused,
        }
    }

    fn one<T: Clone>(&mut self, of: &[T]) -> Option<T> {
        (!of.is_empty()).then(|| of[self.rng.below(of.len())].clone())
    }

    /// A directory on another MDT than `mdt`, if any (else any).
    fn dir_elsewhere(&mut self, mdt: u32) -> String {
        let dirs = self.dirs();
        let away: Vec<String> = dirs.iter().filter(|d| self.fid(d).mdt_index() != mdt).cloned().collect();
        match self.rng.chance(80) && !away.is_empty() {
            true => self.one(&away),
            false => self.one(&dirs),
        }
        .expect("the root is a directory")
    }

    fn children(&self, dir: &str) -> usize {
        let prefix = format!("{dir}/");
        self.names.keys().filter(|p| p.starts_with(&prefix)).count()
    }

    fn links(&self, path: &str) -> usize {
        let id = self.names[path].id;
        self.names.values().filter(|e| e.id == id).count()
    }

    /// The next change, as the seed picks it among those the names allow.
    pub(super) fn pick(&mut self) -> Option<Change> {
        let dirs = self.dirs();
        let files = self.files();
        let change = match self.rng.below(100) {
            0..=17 => {
                let parent = self.one(&dirs)?;
                let name = self.new_name("d");
                let holder = self.holder(&parent, &name);
                let pmdt = holder.mdt_index();
                let path = join(&parent, &name);
                let (count, index) = match self.rng.below(4) {
                    0 => (1, None),
                    1 => (2, Some(MDTS[self.rng.below(2)])),
                    _ => (1, Some(1 - pmdt)),
                };
                let spec = DirStripeSpec { count, index, hash: DirHash::Fnv1a64 };
                let req = mdt::MkdirStriped { parent: holder, name: name.into_bytes(), mode: 0o755, umask: 0, spec };
                let what = format!("mkdir -c {count} -i {index:?} /{path}");
                Change {
                    what,
                    mdt: pmdt,
                    req: req.into(),
                    effect: Effect::Add { path, kind: FileType::Directory, striped: count > 1 },
                    refused: None,
                }
            }
            18..=37 => {
                let parent = self.one(&dirs)?;
                let name = self.new_name("f");
                let path = join(&parent, &name);
                let holder = self.holder(&parent, &name);
                let req = crate::requests::create_file(holder, name);
                let pmdt = holder.mdt_index();
                Change {
                    what: format!("create /{path}"),
                    mdt: pmdt,
                    req: req.into(),
                    effect: Effect::Add { path, kind: FileType::Regular, striped: false },
                    refused: None,
                }
            }
            38..=57 => {
                let from = self.one(&files)?;
                let (sdir, sname) = split(&from);
                let holder = self.holder(sdir, sname);
                let smdt = holder.mdt_index();
                let dir = self.dir_elsewhere(smdt);
                let id = self.names[&from].id;
                let targets: Vec<String> =
                    files.iter().filter(|f| split(f).0 == dir && self.names[*f].id != id).cloned().collect();
                let to = match self.rng.chance(40) {
                    true => self.one(&targets).unwrap_or_else(|| join(&dir, &format!("r{}", self.made + 1))),
                    false => join(&dir, &format!("r{}", self.made + 1)),
                };
                self.made += 1;
                let req = mdt::Rename {
                    src_parent: holder,
                    src_name: sname.as_bytes().to_vec(),
                    dst_parent: self.holder(&dir, split(&to).1),
                    dst_name: split(&to).1.as_bytes().to_vec(),
                    flags: 0,
                };
                Change {
                    what: format!("mv /{from} /{to}"),
                    mdt: smdt,
                    req: req.into(),
                    effect: Effect::Rename { from, to },
                    refused: None,
                }
            }
            58..=67 => {
                let from = self.one(&files)?;
                let fid = self.fid(&from);
                let dir = self.dir_elsewhere(fid.mdt_index());
                // Now and then onto a name taken (refused, after the inode's MDT prepared).
                let taken: Vec<String> = self.names.keys().filter(|p| split(p).0 == dir).cloned().collect();
                let (name, refused) = match self.rng.chance(25) {
                    true if !taken.is_empty() => {
                        let name = self.one(&taken).expect("a name is taken");
                        (split(&name).1.to_string(), Some(ErrorCode::Exists))
                    }
                    _ => (self.new_name("l"), None),
                };
                let to = join(&dir, &name);
                let holder = self.holder(&dir, &name);
                let req = mdt::Link { fid, parent: holder, name: name.into_bytes() };
                let pmdt = holder.mdt_index();
                Change {
                    what: format!("ln /{from} /{to}"),
                    mdt: pmdt,
                    req: req.into(),
                    effect: Effect::Link { from, to },
                    refused,
                }
            }
            68..=77 => {
                let path = self.one(&files)?;
                self.removal(path, false, None)
            }
            78..=85 => {
                // An empty directory; now and then one that is not (refused).
                let refused = self.rng.chance(20).then_some(ErrorCode::NotEmpty);
                let dirs: Vec<String> = self
                    .names
                    .iter()
                    .filter(|(p, e)| e.kind == FileType::Directory && (self.children(p) == 0) == refused.is_none())
                    .map(|(p, _)| p.clone())
                    .collect();
                let path = self.one(&dirs)?;
                self.removal(path, true, refused)
            }
            _ => {
                // A file of one name, or a plain directory (with what it holds).
                let movable: Vec<String> = self
                    .names
                    .iter()
                    .filter(|(p, e)| match e.kind {
                        FileType::Directory => !e.striped,
                        _ => self.links(p) == 1,
                    })
                    .map(|(p, _)| p.clone())
                    .collect();
                let path = self.one(&movable)?;
                let (dir, name) = split(&path);
                let to = 1 - self.fid(&path).mdt_index();
                let holder = self.holder(dir, name);
                let req = mdt::Migrate { parent: holder, name: name.as_bytes().to_vec(), to };
                let pmdt = holder.mdt_index();
                Change {
                    what: format!("migrate -m {to} /{path} ({})", self.fid(&path)),
                    mdt: pmdt,
                    req: req.into(),
                    effect: Effect::Migrate { path },
                    refused: None,
                }
            }
        };
        Some(change)
    }
}

fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}
