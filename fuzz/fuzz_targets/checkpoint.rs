//! Checkpoint decoding: the file form (header, checksum, protobuf, trial
//! restore) and, so the checksum does not stop the fuzzer at the door, the
//! protobuf payload restored directly. A damaged checkpoint is an error,
//! never a panic.
#![no_main]

use classifyd::checkpoint::{self, pb};
use classifyd::pipeline::PipelineConfig;
use libfuzzer_sys::fuzz_target;
use prost::Message as _;

fuzz_target!(|data: &[u8]| {
    let _ = checkpoint::decode_file(data, std::path::Path::new("fuzz"));
    if let Ok(c) = pb::Checkpoint::decode(data) {
        // Models over 2^16 buckets allocate what a real one would: skip them.
        if c.features.as_ref().is_some_and(|f| f.bits <= 16) {
            let _ = checkpoint::restore(c, PipelineConfig::default());
        }
    }
});
