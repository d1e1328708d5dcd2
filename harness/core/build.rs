//! Embeds the shipped scenarios and topologies (`scenarios/*.yaml`, `topologies/*.yaml` at the
//! repository's root) into the binary, so that it finds them by name from any directory and with
//! no checkout on the machine.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("../..");
    let mut files = String::new();
    // FNV-1a over every embedded byte: the cache directory they are written to changes with them.
    let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
    for dir in ["scenarios", "topologies"] {
        let path = root.join(dir);
        println!("cargo:rerun-if-changed={}", path.display());
        let mut entries: Vec<_> = std::fs::read_dir(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        entries.sort();
        for file in entries {
            let name = file.file_stem().expect("a file name").to_string_lossy();
            let text = std::fs::read(&file).expect("readable");
            for b in dir.bytes().chain(name.bytes()).chain(text) {
                digest ^= u64::from(b);
                digest = digest.wrapping_mul(0x0100_0000_01b3);
            }
            let absolute = file.canonicalize().expect("a real path");
            writeln!(
                files,
                "    ({dir:?}, {name:?}, include_str!({:?})),",
                absolute.display().to_string()
            )
            .expect("write");
        }
    }
    let out = format!(
        "/// Every shipped file: (directory, name, text).\npub(crate) static FILES: &[(&str, &str, &str)] = &[\n{files}];\n/// A digest of them all.\npub(crate) const DIGEST: &str = \"{digest:016x}\";\n"
    );
    let dest = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("shipped.rs");
    std::fs::write(dest, out).expect("write shipped.rs");
}
