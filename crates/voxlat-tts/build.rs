//! Links Debian's libespeak-ng (package libespeak-ng-dev). pkg-config is asked first so a
//! non-standard prefix works; the plain `-lespeak-ng` fallback covers systems without the .pc.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let from_pkg_config = Command::new("pkg-config")
        .args(["--libs", "espeak-ng"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    match from_pkg_config {
        Some(flags) => {
            for flag in flags.split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={dir}");
                } else if let Some(lib) = flag.strip_prefix("-l") {
                    println!("cargo:rustc-link-lib=dylib={lib}");
                }
            }
        }
        None => println!("cargo:rustc-link-lib=dylib=espeak-ng"),
    }
}
