//! Python packages for the tests that check tablekit against another SDK:
//! installed with pip into `target/python-sdk-…` on first use, like
//! Azurite with npm. If Python or the packages cannot be had, the tests
//! fail with the reason: they never skip.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's directory.
pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_owned()
}

/// The directory `packages` (pinned) are installed in, for `PYTHONPATH`;
/// `marker` is a directory that is there once they are. The directory is
/// named for the packages, so a change installs afresh. pip installs into
/// a directory of this process's own, renamed into place once whole, so
/// test processes that start together never see half an installation.
pub(crate) fn install(packages: &[&str], marker: &str) -> PathBuf {
    let name = packages.join("_").replace(['=', '.'], "-");
    let dir = workspace()
        .join("target")
        .join(format!("python-sdk-{name}"));
    if dir.join(marker).is_dir() {
        return dir;
    }
    let partial = workspace()
        .join("target")
        .join(format!("python-sdk.partial-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let output = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
            "--target",
        ])
        .arg(&partial)
        .args(packages)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 to install {packages:?}: {e}"));
    assert!(
        output.status.success(),
        "pip could not install {packages:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    if std::fs::rename(&partial, &dir).is_err() {
        // Another test process put its installation in place first.
        let _ = std::fs::remove_dir_all(&partial);
    }
    assert!(
        dir.join(marker).is_dir(),
        "{packages:?} are not in {}",
        dir.display()
    );
    dir
}
