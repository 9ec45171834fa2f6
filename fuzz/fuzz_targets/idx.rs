#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sgmcmc_fuzz::idx(data));
