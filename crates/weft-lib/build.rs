//! Writes include/weft.h (at the workspace's top) from the C API's declarations with
//! cbindgen, when it changed: the header is kept in the repository for people to read, and
//! a build that finds it out of date brings it up to date.

use std::path::PathBuf;

fn main() {
    let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let header = crate_dir.join("../../include/weft.h");
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml reads");
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor, patch) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    let config = cbindgen::Config {
        after_includes: Some(format!(
            "\n/* The version of libweft this header came with (weft_version() gives the library's). */\n\
             #define WEFT_VERSION_MAJOR {major}\n#define WEFT_VERSION_MINOR {minor}\n#define WEFT_VERSION_PATCH {patch}\n\
             #define WEFT_VERSION \"{version}\""
        )),
        ..config
    };
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("the C API's declarations make a header");
    let mut text = Vec::new();
    bindings.write(&mut text);
    if std::fs::read(&header).ok().as_deref() != Some(&text[..]) {
        std::fs::create_dir_all(header.parent().expect("include/ has a parent")).expect("include/ can be made");
        std::fs::write(&header, &text).expect("include/weft.h can be written");
    }
}
