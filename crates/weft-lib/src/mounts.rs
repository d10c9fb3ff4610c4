//! The Weft FUSE mounts of this process's namespace, from /proc/self/mountinfo (type
//! `fuse.weft`, source `mgs:/fsname`): the interception library sends the paths under them
//! to libweft, and the Python module opens a file through one when a program needs a real
//! file descriptor of it.

/// `\040`-style escapes of mountinfo undone.
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// The Weft mounts in a mountinfo text: (mount point, management service).
pub fn parse_mountinfo(text: &str) -> Vec<(Vec<u8>, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else { continue };
        let mut right = right.split(' ');
        let (Some(fstype), Some(source)) = (right.next(), right.next()) else { continue };
        if fstype != "fuse.weft" {
            continue;
        }
        let Some(point) = left.split(' ').nth(4) else { continue };
        let mgs = source.rsplit_once(":/").map_or(source, |(mgs, _)| mgs);
        let mut point = unescape(point);
        while point.len() > 1 && point.ends_with(b"/") {
            point.pop();
        }
        out.push((point, mgs.to_string()));
    }
    out
}

/// Whether two management service addresses (each one or several replicas', separated by
/// commas) name the same service: they share a replica.
pub fn same_service(a: &str, b: &str) -> bool {
    a.split(',').any(|x| b.split(',').any(|y| !x.trim().is_empty() && x.trim() == y.trim()))
}

/// Where this process sees a FUSE mount of the file system whose management service is
/// `mgs`, read from /proc/self/mountinfo now; the first such mount.
pub fn fuse_mount_of(mgs: &str) -> Option<Vec<u8>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    parse_mountinfo(&text).into_iter().find(|(_, m)| same_service(m, mgs)).map(|(point, _)| point)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weft_mounts_are_found_in_mountinfo() {
        let text = "22 1 8:1 / / rw,relatime - ext4 /dev/vda rw\n\
                    70 22 0:50 / /mnt/my\\040weft rw,nosuid - fuse.weft 127.0.0.1:9400:/weft rw,user_id=0\n\
                    71 22 0:51 / /mnt/other rw - fuse.sshfs host:/x rw\n\
                    72 22 0:52 / /w/ rw - fuse.weft a:1,b:2,c:3:/fs2 rw\n";
        assert_eq!(
            parse_mountinfo(text),
            vec![(b"/mnt/my weft".to_vec(), "127.0.0.1:9400".to_string()), (b"/w".to_vec(), "a:1,b:2,c:3".to_string())]
        );
    }

    #[test]
    fn a_service_is_the_same_when_a_replica_is() {
        assert!(same_service("127.0.0.1:9400", "127.0.0.1:9400"));
        assert!(same_service("b:2", "a:1,b:2,c:3"));
        assert!(!same_service("127.0.0.1:9400", "127.0.0.1:9401"));
    }
}
