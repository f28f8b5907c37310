//! Which CPU a run measured on, as far as its numbers can depend on it.
//!
//! ONNX Runtime picks its int8 kernels by CPU: without VNNI, x86's 8-bit dot products
//! saturate, and Smart Turn (int8-quantised) scored one fixture clip 0.942 on such a CPU and
//! 0.597 on one with VNNI. A results file therefore names the CPU and the features that pick
//! those kernels, so two runs whose end-of-turn decisions differ can be told apart from two
//! runs on different CPU families.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuInfo {
    /// `x86_64`, `aarch64`, ...
    pub arch: String,
    /// `/proc/cpuinfo`'s `vendor_id` (GenuineIntel, AuthenticAMD), where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    /// `/proc/cpuinfo`'s `model name`, where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    /// x86 features, as the CPU and the OS together enable them (false elsewhere); AMX from
    /// `/proc/cpuinfo`'s flags.
    pub avx512f: bool,
    pub avx512_vnni: bool,
    pub avx_vnni: bool,
    pub amx_int8: bool,
    /// The int8 kernel family ONNX Runtime uses here: `vnni` or `no-vnni` on x86_64, the
    /// architecture's name elsewhere. Smart Turn's thresholds hold within one family.
    pub int8_family: String,
}

impl CpuInfo {
    /// This machine's CPU.
    pub fn detect() -> CpuInfo {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let (avx512f, avx512_vnni, avx_vnni) = x86_features();
        // std cannot detect AMX on stable Rust; the kernel's flags say whether it is on.
        let amx_int8 = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("flags"))
            .is_some_and(|f| f.split_whitespace().any(|x| x == "amx_int8"));
        CpuInfo::from_parts(
            std::env::consts::ARCH,
            &cpuinfo,
            [avx512f, avx512_vnni, avx_vnni, amx_int8],
        )
    }

    /// From the architecture, `/proc/cpuinfo`'s text and the x86 features (avx512f,
    /// avx512_vnni, avx_vnni, amx_int8).
    pub fn from_parts(arch: &str, cpuinfo: &str, features: [bool; 4]) -> CpuInfo {
        let field = |name: &str| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name && !v.trim().is_empty()).then(|| v.trim().to_string())
            })
        };
        let [avx512f, avx512_vnni, avx_vnni, amx_int8] = features;
        let int8_family = match arch {
            "x86_64" if avx512_vnni || avx_vnni || amx_int8 => "vnni".to_string(),
            "x86_64" => "no-vnni".to_string(),
            other => other.to_string(),
        };
        CpuInfo {
            arch: arch.to_string(),
            vendor: field("vendor_id"),
            model_name: field("model name"),
            avx512f,
            avx512_vnni,
            avx_vnni,
            amx_int8,
            int8_family,
        }
    }

    /// One line for a terminal: the model and the family.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}, int8 kernels: {})",
            self.model_name.as_deref().unwrap_or("unknown CPU"),
            self.arch,
            self.int8_family
        )
    }
}

#[cfg(target_arch = "x86_64")]
fn x86_features() -> (bool, bool, bool) {
    (
        std::is_x86_feature_detected!("avx512f"),
        std::is_x86_feature_detected!("avx512vnni"),
        std::is_x86_feature_detected!("avxvnni"),
    )
}

#[cfg(not(target_arch = "x86_64"))]
fn x86_features() -> (bool, bool, bool) {
    (false, false, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const XEON: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu avx2\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n";

    #[test]
    fn the_family_follows_the_vnni_features() {
        let no = CpuInfo::from_parts("x86_64", XEON, [true, false, false, false]);
        assert_eq!(no.int8_family, "no-vnni");
        assert_eq!(no.vendor.as_deref(), Some("GenuineIntel"));
        assert_eq!(no.model_name.as_deref(), Some("Intel(R) Xeon(R) Processor"));
        for features in [
            [true, true, false, false],
            [false, false, true, false],
            [false, false, false, true],
        ] {
            assert_eq!(
                CpuInfo::from_parts("x86_64", XEON, features).int8_family,
                "vnni"
            );
        }
        let arm = CpuInfo::from_parts("aarch64", "processor\t: 0\nBogoMIPS\t: 50.00\n", [false; 4]);
        assert_eq!(
            (arm.int8_family.as_str(), arm.model_name),
            ("aarch64", None)
        );
    }

    #[test]
    fn this_machine_is_described() {
        let c = CpuInfo::detect();
        assert_eq!(c.arch, std::env::consts::ARCH);
        if c.arch == "x86_64" {
            assert!(["vnni", "no-vnni"].contains(&c.int8_family.as_str()));
            // VNNI on 512-bit vectors needs AVX-512 itself.
            assert!(!c.avx512_vnni || c.avx512f, "{c:?}");
        }
    }
}
