#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| hami_rs_fuzz::node_lock(data));
