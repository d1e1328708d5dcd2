//! The shipped scenarios and topologies, embedded in the binary (see `build.rs`). A shipped
//! file is found by name, and written into kubechaos's cache the first time it is needed
//! (`~/.cache/kubechaos/shipped-VERSION-DIGEST/DIR/NAME.yaml`), so that everything downstream reads
//! files as it reads the user's own; a scenario in `./scenarios` of the same name comes first.

use std::path::PathBuf;

include!(concat!(env!("OUT_DIR"), "/shipped.rs"));

/// kubechaos's cache: `$KUBECHAOS_CACHE`, else `~/.cache/kubechaos`, else
/// `/tmp/kubechaos-cache`.
pub fn cache_base() -> PathBuf {
    std::env::var_os("KUBECHAOS_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/kubechaos")))
        .unwrap_or_else(|| PathBuf::from("/tmp/kubechaos-cache"))
}

/// The names of the shipped files of `dir` (`scenarios`, `topologies`), sorted.
pub fn names(dir: &str) -> Vec<&'static str> {
    FILES
        .iter()
        .filter(|(d, ..)| *d == dir)
        .map(|(_, n, _)| *n)
        .collect()
}

/// The text of shipped file `name` of `dir`.
pub fn text(dir: &str, name: &str) -> Option<&'static str> {
    FILES
        .iter()
        .find(|(d, n, _)| *d == dir && *n == name)
        .map(|(.., t)| *t)
}

/// The path of shipped file `name` of `dir` in the cache, written there if it is not yet (or
/// differs); `None` if there is no such file. An error if the cache cannot be written.
pub fn path(dir: &str, name: &str) -> Option<std::io::Result<PathBuf>> {
    path_in(&cache_base(), dir, name)
}

fn path_in(base: &std::path::Path, dir: &str, name: &str) -> Option<std::io::Result<PathBuf>> {
    let text = text(dir, name)?;
    let folder = base
        .join(format!("shipped-{}-{DIGEST}", env!("CARGO_PKG_VERSION")))
        .join(dir);
    let file = folder.join(format!("{name}.yaml"));
    Some((|| {
        if std::fs::read(&file).is_ok_and(|b| b == text.as_bytes()) {
            return Ok(file.clone());
        }
        std::fs::create_dir_all(&folder)?;
        // Written beside it and renamed: a reader never sees half a file.
        let partial = folder.join(format!(".{name}.{}.partial", std::process::id()));
        std::fs::write(&partial, text)?;
        std::fs::rename(&partial, &file)?;
        Ok(file.clone())
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is embedded is what the repository ships, file for file.
    #[test]
    fn the_embedded_files_are_the_shipped_ones() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for dir in ["scenarios", "topologies"] {
            let mut on_disk: Vec<String> = crate::scenario::yaml_files(&root.join(dir))
                .iter()
                .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
                .collect();
            on_disk.sort();
            assert_eq!(names(dir), on_disk, "{dir}");
            for n in names(dir) {
                let disk =
                    std::fs::read_to_string(root.join(dir).join(format!("{n}.yaml"))).unwrap();
                assert_eq!(text(dir, n), Some(disk.as_str()), "{dir}/{n}");
            }
        }
        assert!(names("scenarios").contains(&"api-restart"));
        assert!(names("topologies").contains(&"control-plane"));
    }

    /// A shipped file is written into the cache once, and written again if it was changed there.
    #[test]
    fn a_shipped_file_is_written_into_the_cache() {
        let cache = tempfile::tempdir().unwrap();
        let p = path_in(cache.path(), "scenarios", "api-restart")
            .unwrap()
            .unwrap();
        assert!(p.starts_with(cache.path()), "{}", p.display());
        let shipped = text("scenarios", "api-restart").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), shipped);
        std::fs::write(&p, "changed").unwrap();
        let again = path_in(cache.path(), "scenarios", "api-restart")
            .unwrap()
            .unwrap();
        assert_eq!(std::fs::read_to_string(again).unwrap(), shipped);
        assert!(path_in(cache.path(), "scenarios", "no-such").is_none());
    }
}
