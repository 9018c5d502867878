#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hami_rs_fuzz::cluster_objects(data));
