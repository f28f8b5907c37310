//! Which of ggml's instruction sets `scripts/lib.sh` switches off for the portable
//! `voxlat-server` on an older x86-64: the shell function is run as the set-up runs it, on
//! `/proc/cpuinfo` flag lists of real CPU generations.

use std::process::Command;

/// The `GGML_*=OFF` options `portable_ggml_flags` prints for a CPU with `cpu_flags`.
fn switched_off(cpu_flags: &str) -> Vec<String> {
    let out = Command::new("bash")
        .args([
            "-c",
            "source scripts/lib.sh && portable_ggml_flags \"$1\"",
            "bash",
            cpu_flags,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn a_cpu_without_avx_builds_the_server_without_avx_avx2_bmi2_fma_or_f16c() {
    // An Intel Core i7 of 2009 (Nehalem), as Linux lists it.
    let nehalem = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 \
                   clflush mmx fxsr sse sse2 ss syscall nx rdtscp lm constant_tsc pni ssse3 \
                   cx16 sse4_1 sse4_2 x2apic popcnt hypervisor lahf_lm";
    assert_eq!(
        switched_off(nehalem),
        [
            "GGML_AVX=OFF",
            "GGML_AVX2=OFF",
            "GGML_BMI2=OFF",
            "GGML_FMA=OFF",
            "GGML_F16C=OFF"
        ]
    );
    // A Core 2 (2006) lacks SSE4.2 too.
    let core2 = "fpu sse sse2 ss syscall nx lm constant_tsc pni ssse3 cx16 lahf_lm";
    assert_eq!(switched_off(core2).len(), 6);
    assert_eq!(switched_off(core2)[0], "GGML_SSE42=OFF");
}

#[test]
fn a_cpu_with_avx2_keeps_the_default_build_and_flags_match_whole_words() {
    let haswell = "fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt avx f16c fma bmi1 bmi2 avx2 movbe";
    assert!(switched_off(haswell).is_empty());
    // `avx512f` and `avx_vnni` are not `avx` or `avx2`.
    let lookalikes = "sse4_2 avx512f avx_vnni avx512_bf16 f16c fma bmi2";
    assert_eq!(switched_off(lookalikes), ["GGML_AVX=OFF", "GGML_AVX2=OFF"]);
}
