//! Striping as a user and an admin see it: setstripe, getstripe, df, path2fid, fid2path, and
//! the data really spread over the OSTs' directories.

mod common;
use common::*;
use std::path::PathBuf;

fn getstripe_json(path: &std::path::Path) -> serde_json::Value {
    let out = weft_ok(&["getstripe", "--json", path.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0].clone()
}

#[test]
fn four_stripe_file_is_spread_over_four_ost_directories() {
    let mut c = Cluster::single_node(&weft_bin(), 4);
    let m = c.mount();
    let f = m.join("wide");
    weft_ok(&["setstripe", "-c", "4", "-S", "1M", f.to_str().unwrap()]);
    let data = pattern(7, 0, 8 << 20);
    std::fs::write(&f, &data).unwrap();

    let out = weft_ok(&["getstripe", f.to_str().unwrap()]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], f.to_str().unwrap());
    assert_eq!(lines[1], "lmm_stripe_count:  4");
    assert_eq!(lines[2], "lmm_stripe_size:   1048576");
    assert_eq!(lines[3], "lmm_pattern:       raid0");
    assert!(lines[4].starts_with("lmm_layout_gen:    "), "{out}");
    assert!(lines[5].starts_with("lmm_stripe_offset: "), "{out}");
    assert!(lines[6].contains("obdidx") && lines[6].contains("objid") && lines[6].contains("group"), "{out}");
    let rows: Vec<Vec<&str>> =
        lines[7..].iter().filter(|l| !l.trim().is_empty()).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), 4, "{out}");
    let mut osts: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    osts.sort();
    assert_eq!(osts, ["0", "1", "2", "3"]);

    // Each OST directory holds one object with exactly the bytes of its stripes.
    let info = getstripe_json(&f);
    let objects = info["layout"]["components"][0]["objects"].as_array().unwrap().clone();
    let data_dir = c.servers[0].data_dir.clone();
    for (k, o) in objects.iter().enumerate() {
        let ost = o["ost"].as_u64().unwrap();
        let seq = o["fid"]["seq"].as_u64().unwrap();
        let oid = o["fid"]["oid"].as_u64().unwrap();
        let path: PathBuf = data_dir.join(format!("ost{ost:04x}/O/{seq:x}/d{}/{oid}", oid % 32));
        let obj = std::fs::read(&path).unwrap_or_else(|e| panic!("object {} of stripe {k}: {e}", path.display()));
        let mut want = Vec::new();
        for unit in [k, k + 4] {
            want.extend_from_slice(&data[unit << 20..(unit + 1) << 20]);
        }
        assert_eq!(obj.len(), 2 << 20, "stripe {k} object size");
        assert!(obj == want, "stripe {k} holds the wrong bytes");
    }
    assert_eq!(std::fs::read(&f).unwrap(), data);
    assert_eq!(weft_ok(&["getstripe", "-c", f.to_str().unwrap()]).trim(), "4");
    assert_eq!(weft_ok(&["getstripe", "-S", f.to_str().unwrap()]).trim(), "1048576");
}

#[test]
fn setstripe_errors_defaults_df_and_fids() {
    let mut c = Cluster::single_node(&weft_bin(), 3);
    let m = c.mount();

    let bad = weft(&["setstripe", "-S", "1000", m.join("x").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("-S") && err.contains("multiple of 64 KiB"), "{err}");
    assert!(!m.join("x").exists(), "a refused setstripe creates nothing");
    let bad = weft(&["setstripe", "-c", "-5", m.join("x").to_str().unwrap()]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("-c"));

    // A directory's default is inherited by new files, and shown by getstripe -d.
    let d = m.join("dir");
    std::fs::create_dir(&d).unwrap();
    weft_ok(&["setstripe", "-c", "2", "-S", "128K", d.to_str().unwrap()]);
    let shown = weft_ok(&["getstripe", "-d", d.to_str().unwrap()]);
    assert!(shown.contains("stripe_count:  2") && shown.contains("stripe_size:   131072"), "{shown}");
    std::fs::write(d.join("child"), b"x").unwrap();
    assert_eq!(weft_ok(&["getstripe", "-c", d.join("child").to_str().unwrap()]).trim(), "2");
    assert_eq!(weft_ok(&["getstripe", "-S", d.join("child").to_str().unwrap()]).trim(), "131072");
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::write(d.join("sub/grandchild"), b"x").unwrap();
    assert_eq!(
        weft_ok(&["getstripe", "-c", d.join("sub/grandchild").to_str().unwrap()]).trim(),
        "2",
        "a new subdirectory inherits its parent's default, as in Lustre"
    );
    weft_ok(&["setstripe", "-c", "-1", m.join("all").to_str().unwrap()]);
    assert_eq!(weft_ok(&["getstripe", "-c", m.join("all").to_str().unwrap()]).trim(), "3");

    // df: one row per target, then the summary, as lfs df prints.
    let df = weft_ok(&["df", m.to_str().unwrap()]);
    let rows: Vec<&str> = df.lines().collect();
    assert!(rows[0].starts_with("UUID") && rows[0].contains("Mounted on"), "{df}");
    for (name, tag) in
        [("weft-MDT0000_UUID", "[MDT:0]"), ("weft-OST0000_UUID", "[OST:0]"), ("weft-OST0002_UUID", "[OST:2]")]
    {
        assert!(rows.iter().any(|r| r.starts_with(name) && r.ends_with(tag)), "{name} {tag} missing:\n{df}");
    }
    assert!(rows.iter().any(|r| r.starts_with("filesystem_summary:")), "{df}");
    let dfi = weft_ok(&["df", "-i", m.to_str().unwrap()]);
    assert!(dfi.lines().next().unwrap().contains("Inodes"), "{dfi}");
    let j: serde_json::Value = serde_json::from_str(&weft_ok(&["df", "--json", m.to_str().unwrap()])).unwrap();
    assert_eq!(j[0]["targets"].as_array().unwrap().len(), 4);

    // path2fid and fid2path invert each other, also after a rename.
    let fid = weft_ok(&["path2fid", d.join("child").to_str().unwrap()]).trim().to_string();
    assert!(fid.starts_with("[0x") && fid.ends_with(']'), "{fid}");
    std::fs::rename(d.join("child"), d.join("renamed")).unwrap();
    assert_eq!(weft_ok(&["path2fid", d.join("renamed").to_str().unwrap()]).trim(), fid, "a FID survives renames");
    let path = weft_ok(&["fid2path", m.to_str().unwrap(), &fid]);
    assert_eq!(path.trim(), d.join("renamed").to_str().unwrap());
}

#[test]
fn sparse_out_of_order_ost_indices() {
    let mut c = Cluster::start(
        &weft_bin(),
        vec![NodeSpec::new("mgs", "127.0.0.1").mgs().mdt(0), NodeSpec::new("oss", "127.0.0.1").osts(&[1000, 7, 0])],
    );
    let m = c.mount();
    let f = m.join("f");
    weft_ok(&["setstripe", "-c", "-1", "-S", "64K", f.to_str().unwrap()]);
    let data = pattern(3, 0, 1 << 20);
    std::fs::write(&f, &data).unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), data);
    let out = weft_ok(&["getstripe", f.to_str().unwrap()]);
    let mut idx: Vec<u32> =
        out.lines().skip(7).filter_map(|l| l.split_whitespace().next()).filter_map(|s| s.parse().ok()).collect();
    idx.sort();
    assert_eq!(idx, [0, 7, 1000], "{out}");
    weft_ok(&["setstripe", "-c", "1", "-i", "1000", m.join("one").to_str().unwrap()]);
    assert_eq!(weft_ok(&["getstripe", "-i", m.join("one").to_str().unwrap()]).trim(), "1000");
    let df = weft_ok(&["df", m.to_str().unwrap()]);
    assert!(df.contains("weft-OST03e8_UUID") && df.contains("[OST:1000]"), "{df}");
}
